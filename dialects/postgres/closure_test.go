package postgres

import (
	"slices"
	"testing"
)

// closureKinds says, for every kind of catalog object the server can make
// depend on a function or hold an expression of, how a statement's use of
// what it names reaches it in catalogSQL (followed), or why no session's
// statement runs it. The kinds come from the running server (see
// TestClosureKinds): a kind a new server adds fails the test until it is
// placed here, with the closure following it where a statement can run
// it.
var closureKinds = map[string]string{
	// Followed: reached from a relation, type, function or operator a
	// statement names, through pg_depend (uses in catalogSQL) or read as
	// an expression (tree).
	"pg_aggregate":         "followed: a user's aggregate is a user's function; its call is never proved harmless (functionsSQL reads no body of one)",
	"pg_amproc":            "followed: a type's default btree or hash operator class, and an index's, reach their family's support functions",
	"pg_attrdef":           "followed: a default is part of its table (pg_depend 'a'); its tree is read",
	"pg_cast":              "followed: a cast to json of a type reached; every other user's cast with a function counts where a cast is written (Shadows.Casts, .All)",
	"pg_class":             "followed: a relation runs its parts (pg_depend 'a' and 'i'): rules, triggers, defaults, checks, policies, indexes, partitions; its partition key and index expressions are read",
	"pg_constraint":        "followed: a check is part of its table or domain; a foreign key makes a cascade from the referenced table reach the referencing one",
	"pg_event_trigger":     "followed: an enabled event trigger makes every DDL statement count",
	"pg_index":             "followed: an index is part of its table; its expressions and predicate are read",
	"pg_operator":          "followed: an operator uses its function (pg_depend 'n'); a user's unsafe operator counts where its name is written",
	"pg_partitioned_table": "followed: the partition key's functions are the table's pg_depend 'n'; its expressions are read",
	"pg_policy":            "followed: a policy is part of its table; its expressions are read",
	"pg_proc":              "followed: a user's function reached is code; a call by name is proved by its body (functionsSQL), never with argument defaults or a BEGIN ATOMIC body",
	"pg_range":             "followed: a range type uses its canonical and subtype_diff functions (pg_depend 'n')",
	"pg_rewrite":           "followed: a view runs its rules (pg_depend 'i'), which use what their trees name; any other rule counts",
	"pg_trigger":           "followed: every trigger but a foreign key's internal ones counts",
	"pg_type":              "followed: a type uses its I/O, typmod, analyze and subscript functions, its base or element type; a domain runs its checks (pg_depend 'a'); its default's tree is read",

	// Not run by a session's statement, or only by C functions, which
	// only a superuser can make.
	"pg_am":                   "not followed: an access method's handler is C",
	"pg_conversion":           "not followed: a conversion runs where client_encoding changes, a session change already; its function is C",
	"pg_foreign_data_wrapper": "not followed: a wrapper's functions are C; a foreign table counts whole",
	"pg_language":             "not followed: a language's handlers are C",
	"pg_publication_rel":      "not followed: a publication's row filter runs in logical decoding, not in the session",
	"pg_statistic_ext":        "not followed: extended statistics' expressions run in ANALYZE",
	"pg_transform":            "not followed: a transform's functions take internal, so are C",
	"pg_ts_parser":            "not followed: a text search parser's functions are C",
	"pg_ts_template":          "not followed: a text search template's functions take internal, so are C",
}

// TestClosureKinds asks the running server which kinds of catalog objects
// can run a function or hold an expression a statement may run: every
// catalog with a column referencing pg_proc (pg_get_catalog_foreign_keys),
// with an expression column (pg_node_tree), or whose rows depend on a
// function now (pg_depend); each must be placed in closureKinds.
func TestClosureKinds(t *testing.T) {
	c := wrapped(t)
	res, err := c.pgx().PgConn().Exec(t.Context(), `SELECT DISTINCT k FROM (
	SELECT fktable::text AS k FROM pg_catalog.pg_get_catalog_foreign_keys() WHERE pktable = 'pg_catalog.pg_proc'::pg_catalog.regclass
	UNION SELECT a.attrelid::pg_catalog.regclass::text FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class r ON r.oid = a.attrelid
		WHERE a.atttypid = 'pg_catalog.pg_node_tree'::pg_catalog.regtype AND r.relnamespace = 'pg_catalog'::pg_catalog.regnamespace AND r.relkind = 'r'
	UNION SELECT d.classid::pg_catalog.regclass::text FROM pg_catalog.pg_depend d WHERE d.refclassid = 'pg_catalog.pg_proc'::pg_catalog.regclass
) s ORDER BY 1`).ReadAll()
	if err != nil {
		t.Skipf("the server cannot list its catalogs' references (PostgreSQL 14 and later can): %v", err)
	}
	var kinds []string
	for _, row := range res[0].Rows {
		kinds = append(kinds, string(row[0]))
	}
	if len(kinds) < 10 {
		t.Fatalf("the server listed %d kinds (%v): the query reads too little to prove anything", len(kinds), kinds)
	}
	for _, k := range kinds {
		why, ok := closureKinds[k]
		if !ok {
			t.Errorf("%s can depend on a function or hold an expression, and catalogSQL's closure does not say how it is reached: place it in closureKinds, following it where a statement can run it", k)
			continue
		}
		t.Logf("%-24s %s", k, why)
	}
	for k := range closureKinds {
		if !slices.Contains(kinds, k) {
			t.Logf("%s: placed, but this server lists it not (another version's kind)", k)
		}
	}
}
