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
		{"# x\rCOMMIT\nSELECT 1", []string{"SELECT"}, true, false}, // '\r' ends no comment here
		{"SELECT 1 --\x7f\nCOMMIT", nil, false, true},              // a comment or not, by the charset
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

// TestHidesChanges: SQL built at run time and compound statements count as
// changes whose report the server may not send.
func TestHidesChanges(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  bool
	}{
		{"SELECT 1", false},
		{"BEGIN", false},
		{"BEGIN WORK", false},
		{"begin; insert into t values (1)", false},
		{"SELECT 'EXECUTE IMMEDIATE', `BEGIN` FROM t", false},
		{"SELECT a FROM t WHERE b = 'x;EXECUTE s'", false},
		{"INSERT INTO t (execute) VALUES (1)", false},
		{"CALL p()", false}, // stored programs are not looked into
		{"CALL p(1, 'a@b', `x@y`, \"c@d\") /* @v */ -- @w", false},
		{"CALL p(@v)", true}, // an OUT parameter assigns @v
		{"call p(1, @`my var`)", true},
		{"CALL p(@@session.sql_mode)", true}, // counts, conservatively
		{"SELECT 1; CALL p(@v)", true},
		{"SELECT @v; CALL p()", false},
		{"LOAD DATA LOCAL INFILE 'f' INTO TABLE t (a, @v) SET b = @v", true},
		{"load data infile 'x@y' into table t", false},
		{"LOAD XML LOCAL INFILE 'f' INTO TABLE t (a, @v)", true},
		{"EXECUTE IMMEDIATE 'SET @v = 42'", true},
		{"execute immediate concat('SELECT GET', '_LOCK(''x'', 0)')", true},
		{"EXECUTE s USING @a", true},
		{"SELECT 1; EXECUTE IMMEDIATE 'SET @v = 1'", true},
		{"/* x */ EXECUTE IMMEDIATE 'DO 1'", true},
		{"BEGIN NOT ATOMIC SET @v = 42; END", true},
		{"begin  not atomic select get_lock('x', 0); end", true},
		{"lbl: BEGIN NOT ATOMIC END", true},
		{"lbl : LOOP LEAVE lbl; END LOOP", true},
		{"`my label`: BEGIN NOT ATOMIC END", true},
		{"IF 1 THEN SET @v = 1; END IF", true},
		{"CASE WHEN 1 THEN SELECT 1; END CASE", true},
		{"WHILE 0 DO SELECT 1; END WHILE", true},
		{"REPEAT SELECT 1; UNTIL 1 END REPEAT", true},
		{"FOR i IN 1..2 DO SELECT i; END FOR", true},
		{"/*!50000 SELECT 1 */", true},
		{"SELECT 'unterminated", true},
		{"SELECT '\\'; EXECUTE IMMEDIATE '", true}, // where statements start depends on sql_mode
	} {
		if got := hidesChanges(tc.query); got != tc.want {
			t.Errorf("hidesChanges(%q) = %v, want %v", tc.query, got, tc.want)
		}
		if got := textMemo.Get(tc.query); got.hidesChanges != tc.want || got.mayChangeTx != mayChangeTx(tc.query) {
			t.Errorf("textMemo.Get(%q) = %+v", tc.query, got)
		}
	}
}

func FuzzStatementKeywords(f *testing.F) {
	f.Add("SELECT 1; BEGIN")
	f.Add("/*!40101 START TRANSACTION */")
	f.Add("lbl: BEGIN NOT ATOMIC SET @v = 1; END")
	f.Add("`l`:LOOP")
	f.Add("CALL p(@v, '@w')")
	f.Add("LOAD DATA INFILE 'f' INTO TABLE t (@v)")
	f.Fuzz(func(t *testing.T, q string) {
		statementKeywords(q)
		mayChangeTx(q)
		hidesChanges(q)
	})
}
