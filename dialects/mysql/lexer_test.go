package mysql

import (
	"slices"
	"testing"
)

func TestStatementKeywords(t *testing.T) {
	for _, tc := range []struct {
		query    string
		keywords []string // nil with ok false: cannot tell
		ok       bool
		changes  bool // mayChangeTx
	}{
		{"SELECT 1", []string{"SELECT"}, true, false},
		{"  select * from t where a = 'BEGIN'", []string{"SELECT"}, true, false},
		{"insert into t values (?)", []string{"INSERT"}, true, false},
		{"UPDATE t SET a = 1", []string{"UPDATE"}, true, false},
		{"DELETE FROM t", []string{"DELETE"}, true, false},
		{"REPLACE INTO t VALUES (1)", []string{"REPLACE"}, true, false},
		{"WITH x AS (SELECT 1) SELECT * FROM x", []string{"WITH"}, true, false},
		{"(SELECT 1) UNION (SELECT 2)", []string{"SELECT"}, true, false},
		{"SHOW TABLES", []string{"SHOW"}, true, false},
		{"-- comment\nSELECT 1", []string{"SELECT"}, true, false},
		{"# comment\nSELECT 1", []string{"SELECT"}, true, false},
		{"/* BEGIN */ SELECT 1", []string{"SELECT"}, true, false},
		{"SELECT 1; SELECT 2;", []string{"SELECT", "SELECT"}, true, false},
		{"SELECT 'a;b', `c;d`, \"e;f\"", []string{"SELECT"}, true, false},
		{"SELECT 'it''s'; SELECT 2", []string{"SELECT", "SELECT"}, true, false},
		{"BEGIN", []string{"BEGIN"}, true, true},
		{"begin work", []string{"BEGIN"}, true, true},
		{"START TRANSACTION READ ONLY", []string{"START"}, true, true},
		{"COMMIT", []string{"COMMIT"}, true, true},
		{"ROLLBACK TO SAVEPOINT a", []string{"ROLLBACK"}, true, true},
		{"SAVEPOINT a", []string{"SAVEPOINT"}, true, true},
		{"RELEASE SAVEPOINT a", []string{"RELEASE"}, true, true},
		{"SET autocommit = 0", []string{"SET"}, true, true},
		{"set @@session.autocommit=1", []string{"SET"}, true, true},
		{"XA START 'x'", []string{"XA"}, true, true},
		{"CALL p()", []string{"CALL"}, true, true},
		{"LOCK TABLES t WRITE", []string{"LOCK"}, true, true},
		{"UNLOCK TABLES", []string{"UNLOCK"}, true, true},
		{"CREATE TABLE t (a int)", []string{"CREATE"}, true, true},
		{"ALTER TABLE t ADD b int", []string{"ALTER"}, true, true},
		{"TRUNCATE t", []string{"TRUNCATE"}, true, true},
		{"EXECUTE s", []string{"EXECUTE"}, true, true},
		{"SELECT 1; BEGIN", []string{"SELECT", "BEGIN"}, true, true},
		{"SELECT 1;\n-- x\nCOMMIT", []string{"SELECT", "COMMIT"}, true, true},
		{"/*!40101 START TRANSACTION */", nil, false, true},
		{"/*M!100000 BEGIN */", nil, false, true},
		{"SELECT '\\'; BEGIN; SELECT '", nil, false, true},
		{"SELECT 'unterminated", nil, false, true},
		{"/* unterminated", nil, false, true},
		{"", nil, true, true},
		{"   ", nil, true, true},
		{"--no space is not a comment in MySQL", nil, false, true},
		{"SELECT 'a\\'b'", []string{"SELECT"}, true, false},
	} {
		kw, ok := statementKeywords(tc.query)
		if ok != tc.ok || (ok && !slices.Equal(kw, tc.keywords)) {
			t.Errorf("statementKeywords(%q) = %q, %v; want %q, %v", tc.query, kw, ok, tc.keywords, tc.ok)
		}
		if got := mayChangeTx(tc.query); got != tc.changes {
			t.Errorf("mayChangeTx(%q) = %v, want %v", tc.query, got, tc.changes)
		}
	}
}

func FuzzStatementKeywords(f *testing.F) {
	f.Add("SELECT 1; BEGIN")
	f.Add("/*!40101 START TRANSACTION */")
	f.Fuzz(func(t *testing.T, q string) {
		statementKeywords(q)
		mayChangeTx(q)
	})
}
