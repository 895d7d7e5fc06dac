package pooldriver

import (
	"fmt"

	"github.com/pooldriver/pooldriver/dialects"
)

// parseDSN finds the DSN's dialect and lets it split the DSN into a
// credential template and pool parameters. Errors never quote the DSN,
// which may hold a password.
func parseDSN(dsn string) (dialects.Template, map[string]string, error) {
	if dsn == "" {
		return nil, nil, fmt.Errorf("pooldriver: empty DSN")
	}
	scheme, ok := dialects.SchemeOf(dsn)
	if !ok {
		return nil, nil, fmt.Errorf("pooldriver: the DSN has no scheme: want postgres://, postgresql://, mysql://, odbc:// or a key=value PostgreSQL string")
	}
	d, err := dialects.Lookup(scheme)
	if err != nil {
		return nil, nil, err
	}
	t, params, err := d.Parse(dsn)
	if err != nil {
		return nil, nil, err
	}
	return t, params, nil
}
