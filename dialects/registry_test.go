package dialects

import (
	"strings"
	"testing"
)

// schemeCases feed TestSchemeOf and FuzzSchemeOf's corpus.
var schemeCases = []struct {
	name, dsn string
	scheme    string // "" with ok false: no scheme
}{
	{"url", "postgres://app@db:5432/shop", "postgres"},
	{"url, scheme in capitals", "PostgreSQL://app@db/shop", "postgresql"},
	{"mysql url", "mysql://root@tcp(127.0.0.1:3306)/test", "mysql"},
	{"odbc url", "odbc://Driver={PostgreSQL};Server=db", "odbc"},
	{"keyword/value", "host=db user=app", "postgres"},
	{"quoted ';' in a password", "host=127.0.0.1 user=u password='a;b' dbname=test", "postgres"},
	{"quoted ';' after spaces around '='", "user=u password = 'a;b'", "postgres"},
	{"quoted ';' after an escaped quote", `password='it\'s;b' user=u`, "postgres"},
	{"quoted ';' after an escaped backslash", `password='a\\;b'`, "postgres"},
	{"quoted ';' and '=' in a value", `options='-c x=1;' user=u`, "postgres"},
	{"quoted values one after another", "user='u;1' password='p;2' dbname=test", "postgres"},
	{"unterminated quote: pgx reports it", "password='a;b", "postgres"},
	{"';' after a quoted value", "password='a';b=c", ""},
	{"';' after an escaped backslash closes the quote", `password='a\\';b=c`, ""},
	{"unquoted ';' reads as ODBC", "user=u password=a;b", ""},
	{"odbc", "Driver={PostgreSQL};Server=db;Uid=u", ""},
	{"odbc, a quote inside a value", "Uid=u;Pwd=it's;Server=db", ""},
	{"odbc, a quote inside a value, then ';'", "Pwd=it's;Server=db", ""},
	{"odbc, a path ending with a backslash", `DefaultDir=C:\data\;Driver={x}`, ""},
	{"odbc, a quote after a backslash", `Pwd=\'x;Server=db`, ""},
	{"no '='", "db.example.com", ""},
	{"empty", "", ""},
}

func TestSchemeOf(t *testing.T) {
	for _, tc := range schemeCases {
		t.Run(tc.name, func(t *testing.T) {
			scheme, ok := SchemeOf(tc.dsn)
			if scheme != tc.scheme || ok != (tc.scheme != "") {
				t.Fatalf("SchemeOf(%q) = %q, %t; want %q, %t", tc.dsn, scheme, ok, tc.scheme, tc.scheme != "")
			}
		})
	}
}

// FuzzSchemeOf: SchemeOf never panics, and every DSN it took for a
// keyword/value string before quotes were looked into (a '=', no ';') it
// still takes for one.
func FuzzSchemeOf(f *testing.F) {
	for _, tc := range schemeCases {
		f.Add(tc.dsn)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		scheme, ok := SchemeOf(dsn)
		if strings.Contains(dsn, "://") {
			return
		}
		if strings.Contains(dsn, "=") && !strings.Contains(dsn, ";") && (scheme != "postgres" || !ok) {
			t.Fatalf("SchemeOf(%q) = %q, %t; want postgres", dsn, scheme, ok)
		}
	})
}
