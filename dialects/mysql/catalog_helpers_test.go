package mysql

import (
	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/dialects/internal/sqllex"
)

// fixedCatalog returns a Catalog of its own holding v, which no connection
// reads again (it stays claimed): a test's statements are judged against
// v alone, whatever the server's catalog holds and however long it runs.
func fixedCatalog(v shadows) *dialects.Catalog[shadows] {
	cat := new(dialects.Catalog[shadows])
	cat.Store(v)
	cat.Claim(true)
	return cat
}

// noShadows is a reading of a catalog without stored functions, triggers
// or views, whose triggers the user sees everywhere.
func noShadows() shadows { return shadows{s: &sqllex.Shadows{}} }
