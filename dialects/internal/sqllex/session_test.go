package sqllex

import "testing"

// sessionCases feeds the session rule tests and the fuzz corpus. pg, my and
// anyDB are ChangesSession's answers for Postgres, MySQL and Any.
var sessionCases = []struct {
	query         string
	pg, my, anyDB bool
}{
	// Sequence positions: moved as an INSERT moves them, or planted.
	{"SELECT LAST_INSERT_ID()", false, false, false},
	{"SELECT last_insert_id ( )", false, false, false},
	{"SELECT LAST_INSERT_ID(666)", false, true, true},
	{"SELECT last_insert_id(id + 1) FROM t", false, true, true},
	{"SELECT nextval('s'), currval('s'), lastval()", false, false, false},
	{"SELECT setval('s', 666)", true, true, true},
	{"SELECT SETVAL(s, 1)", true, true, true},
	// Plain statements.
	{"SELECT a FROM t WHERE id = $1", false, false, false},
	{"INSERT INTO users (name, email) VALUES ($1, $2)", false, false, false},
	{"insert into t values (?, ?)", false, false, false},
	{"UPDATE t SET a = 1 WHERE id = 2", false, false, false},
	{"update t set a = (select 1) where b = 'SET x = 1'", false, false, false},
	{"DELETE FROM t", false, false, false},
	{"", false, false, false},
	{"   ", false, false, false},
	{"SELECT 'SET x = 1'", false, false, false},
	{"SELECT 'pg_advisory_lock(1)', 'GET_LOCK(1)'", false, false, false},
	{"SELECT 1 -- SET x = 1", false, false, false},
	{"SELECT 1 /* SET x = 1 */", false, false, false},
	{"SELECT 1 /* nested /* SET x = 1 */ still a comment */", false, false, false},
	{"SELECT * FROM users", false, false, false},
	{"SELECT temp, temperature FROM weather", false, false, false},
	{"SELECT offset, settings, reset_at FROM t", false, false, false},
	{"INSERT INTO t (a) VALUES (1) ON CONFLICT (a) DO UPDATE SET a = excluded.a", false, false, false},
	{"INSERT INTO t SET a = 1", false, false, false},
	{"ALTER TABLE t ALTER COLUMN a SET DEFAULT 1", false, false, false},
	{"ALTER ROLE app SET search_path = x", false, false, false},
	{"SELECT is_used_lock('x'), is_free_lock('x')", false, false, false},
	{"CREATE TABLE t (temp int)", false, false, false},
	{"DROP TABLE temp", false, false, false},
	{"WITH hold AS (SELECT 1) SELECT * FROM hold", false, false, false},
	{"SELECT set_config", false, false, false},
	{"EXECUTE s(1)", false, false, false},
	{"SELECT email FROM t WHERE email = 'a@b.c'", false, false, false},
	{"SELECT 1; SELECT 2;", false, false, false},

	// Words that count only first in a statement.
	{"UPDATE t SET a = 1;SET x.y = 1", true, true, true},
	{"UPDATE t SET a = 1 -- x\nSET x.y = 1", false, false, false}, // one statement: SET after a comment, not after ';'
	{"SELECT 1; -- x\nSET x.y = 1", true, true, true},
	{"SELECT 1; /* x */ SET x.y = 1", true, true, true},
	{"SELECT 1;/**/SET x.y = 1", true, true, true},
	{"SELECT 1 # x\n;SET x.y = 1", true, true, true},
	{"SELECT 1 # ;\nSET x.y = 1", true, false, true}, // PostgreSQL: # is no comment, the ';' ends the statement
	{"INSERT INTO t SET a = 1, b = 'x'", false, false, false},
	{"SELECT a FROM t WHERE x = 'do' LIMIT 1 OFFSET 2", false, false, false},
	{"\n\t  RESET ALL", true, true, true},
	{"SELECT 1;\n\tLOCK TABLES t WRITE", false, true, true},
	{"DROP PREPARE s", false, true, true},

	// PostgreSQL SET and RESET.
	{"SET search_path = app", true, true, true},
	{"set TIME ZONE 'UTC'", true, true, true},
	{"  SET\n\tstatement_timeout TO 5", true, true, true},
	{"SET SESSION work_mem = '64MB'", true, true, true},
	{"SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE", true, true, true},
	{"SET ROLE app", true, true, true},
	{"SET SESSION AUTHORIZATION app", true, true, true},
	{"SET LOCAL search_path = app", false, true, true},
	{"set local statement_timeout = 5", false, true, true},
	{"SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", false, true, true},
	{"SET CONSTRAINTS ALL DEFERRED", false, true, true},
	{"SET local.setting = 1", true, true, true},
	{"SET LOCAL local.setting = 1", false, true, true},
	{"SET", true, true, true},
	{"SET LOCAL", false, true, true},
	{"RESET ALL", true, true, true},
	{"reset search_path", true, true, true},
	{"BEGIN; SET LOCAL x.y = 1; COMMIT", false, true, true},
	{"BEGIN; SET x.y = 1; COMMIT", true, true, true},
	{"SELECT 1; set search_path = a", true, true, true},
	{"/* c */ SET x.y = 1", true, true, true},
	{"-- c\nSET x.y = 1", true, true, true},

	// set_config.
	{"SELECT set_config('app.user', '42', false)", true, false, true},
	{"SELECT set_config('app.user', '42', true)", false, false, false},
	{"select SET_CONFIG('app.user', $1, TRUE)", false, false, false},
	{"SELECT pg_catalog.set_config('a.b', 'c', true)", false, false, false},
	{"SELECT set_config('a.b', 'c', $1)", true, false, true},
	{"SELECT set_config('a.b', 'c', 'true')", true, false, true},
	{"SELECT set_config('a.b', 'c', (true))", true, false, true},
	{"SELECT set_config('a.b', 'c', true AND false)", true, false, true},
	{"SELECT set_config('a.b', 'c')", true, false, true},
	{"SELECT set_config('a.b', f(1, 2), true), 1", false, false, false},
	{"SELECT set_config('a.b', set_config('c.d', 'e', true), true)", true, false, true},
	{"SELECT \"set_config\"('a.b', 'c', false)", true, false, true},
	{"SELECT set_config('a.b', 'c', true), set_config('d.e', 'f', false)", true, false, true},
	{"SELECT set_config('a.b', 'c', true", true, false, true},
	{"SELECT * FROM t WHERE x = set_config('a.b', 'c', false)", true, false, true},

	// Advisory locks.
	{"SELECT pg_advisory_lock(1)", true, false, true},
	{"SELECT pg_try_advisory_lock(1, 2)", true, false, true},
	{"SELECT pg_advisory_lock_shared($1)", true, false, true},
	{"SELECT pg_try_advisory_lock_shared(1)", true, false, true},
	{"SELECT PG_ADVISORY_UNLOCK(1)", true, false, true},
	{"SELECT pg_advisory_unlock_all()", true, false, true},
	{"SELECT pg_catalog.pg_advisory_lock(1)", true, false, true},
	{"SELECT pg_advisory_xact_lock(1)", false, false, false},
	{"SELECT pg_try_advisory_xact_lock(1)", false, false, false},
	{"SELECT pg_advisory_xact_lock_shared(1)", false, false, false},
	{"SELECT pg_try_advisory_xact_lock_shared(1)", false, false, false},
	{"SELECT advisory FROM t", false, false, false},

	// Temporary objects.
	{"CREATE TEMP TABLE t (a int)", true, true, true},
	{"CREATE TEMPORARY TABLE t AS SELECT 1", true, true, true},
	{"create global temporary table t (a int)", true, true, true},
	{"CREATE LOCAL TEMP TABLE t (a int)", true, true, true},
	{"CREATE OR REPLACE TEMP VIEW v AS SELECT 1", true, true, true},
	{"CREATE TEMP SEQUENCE s", true, true, true},
	{"CREATE /* x */ TEMP TABLE t (a int)", true, true, true},
	{"SELECT * INTO TEMP t FROM u", true, true, true},
	{"CREATE TABLE pg_temp.t (a int)", true, false, true},
	{"CREATE FUNCTION pg_temp.f() RETURNS int AS 'SELECT 1' LANGUAGE sql", true, false, true},
	{"CREATE TABLE \"pg_temp\".t (a int)", true, false, true},
	{"DROP TEMPORARY TABLE t", true, true, true},
	{"CREATE OR REPLACE TEMPORARY TABLE t (a int)", true, true, true},
	{"CREATE TABLE #t (a int)", false, false, true},
	{"SELECT a INTO #t FROM u", false, false, true},

	// PostgreSQL session statements.
	{"PREPARE s AS SELECT 1", true, true, true},
	{"PREPARE s FROM 'SELECT 1'", true, true, true},
	{"DEALLOCATE ALL", true, true, true},
	{"DEALLOCATE PREPARE s", true, true, true},
	{"DROP PREPARE s", false, true, true},
	{"LISTEN chan", true, false, true},
	{"UNLISTEN *", true, false, true},
	{"NOTIFY chan", false, false, false},
	{"DECLARE c CURSOR WITH HOLD FOR SELECT 1", true, false, true},
	{"declare c binary scroll cursor with hold for select 1", true, false, true},
	{"DECLARE c CURSOR WITHOUT HOLD FOR SELECT 1", false, false, false},
	{"DECLARE c CURSOR FOR SELECT 1", false, false, false},
	{"DISCARD ALL", true, false, true},
	{"discard temp", true, false, true},
	{"LOAD 'auto_explain'", true, false, true},
	{"DO $$ BEGIN PERFORM 1; END $$", true, false, true},
	{"DO LANGUAGE plpgsql 'BEGIN NULL; END'", true, false, true},

	// PostgreSQL quoting.
	{"SELECT $$SET x = 1$$", false, false, false},                        // MySQL: $$SET is a name
	{"SELECT $tag$ it's; SET x = 1 $tag$", false, true, true},            // MySQL: the quote runs on: cannot tell
	{"SELECT $a$ $b$ SET $b$ $a$; SELECT 1", false, false, false},        // nested tags
	{"SELECT $1, $2 FROM t; SELECT 'SET'", false, false, false},          // parameters are no tags
	{"SELECT $$unterminated SET", false, false, false},                   // no SET can start a statement here
	{"SELECT $$unterminated; SET", true, true, true},                     // PostgreSQL cannot lex it; MySQL sees a SET
	{"SELECT 'C:\\'; SET x.y = 1", true, true, true},                     // the string ends at the second quote without escapes
	{"SELECT 'a\\'; SET x.y = 1; --'", true, true, true},                 // either reading
	{"SELECT E'a\\'; SET x.y = 1; --'", false, true, true},               // E'' escapes: one string
	{"SELECT e'it\\'s', 'SET'", false, false, false},                     // no SET can start a statement here
	{"SELECT e'it\\'s'; SET", true, true, true},                          // a bare SET
	{"SELECT \"SET\" FROM t", false, false, false},                       // an identifier
	{"SELECT 'a''b SET c'", false, false, false},                         // doubled quote
	{"SELECT 1 /* /* */; SET x = 1 */", false, true, true},               // nested in PostgreSQL only
	{"SELECT 1 /* unterminated SET", false, false, false},                // no SET can start a statement here
	{"SELECT 1 /* unterminated; SET x = 1", true, true, true},            // cannot lex
	{"SELECT 'unterminated SET", false, false, false},                    // no SET can start a statement here
	{"SELECT 'unterminated; SET", true, true, true},                      // cannot lex
	{"SELECT 'unterminated GET_LOCK(1)", false, true, true},              // cannot lex
	{"SELECT x$set FROM t", false, false, false},                         // one name
	{"SELECT 1;\n\n  sEt  search_path=a", true, true, true},              // case and white space
	{"select 1 ; ; ; reset all ;", true, true, true},                     // empty statements
	{"SELECT U&'\\0041 SET'", false, false, false},                       // one string either way
	{"SELECT 'x'; -- '\nSET x.y = 1", true, true, true},                  // a comment does not hide the next line
	{"SELECT a FROM t WHERE b = 'x'; -- SET x = 1", false, false, false}, // a trailing comment

	// MySQL statements.
	{"SET @x = 1", true, true, true},
	{"set @@session.sql_mode = ''", true, true, true},
	{"SET SESSION sql_mode = ''", true, true, true},
	{"SET sql_mode = ''", true, true, true},
	{"SET NAMES utf8mb4", true, true, true},
	{"SET CHARACTER SET utf8mb4", true, true, true},
	{"SET autocommit = 0", true, true, true},
	{"SET GLOBAL max_connections = 10", true, true, true},
	{"SET STATEMENT max_statement_time = 1 FOR SELECT 1", true, true, true},
	{"SELECT GET_LOCK('x', 10)", false, true, true},
	{"SELECT release_lock('x')", false, true, true},
	{"DO RELEASE_ALL_LOCKS()", true, true, true}, // DO is PostgreSQL's code block too
	{"SELECT service_get_write_locks('ns', 'lock1', 10)", false, true, true},
	{"LOCK TABLES t WRITE", false, true, true},
	{"lock table t read", false, true, true},
	{"UNLOCK TABLES", false, true, true},
	{"FLUSH TABLES WITH READ LOCK", false, true, true},
	{"BACKUP STAGE START", false, true, true},
	{"USE shop", false, true, true},
	{"HANDLER t OPEN", false, true, true},
	{"XA START 'x'", false, true, true},
	{"SELECT a INTO @x FROM t", false, true, true},
	{"SELECT a, b INTO @x, @y FROM t LIMIT 1", false, true, true},
	{"SELECT @x := a FROM t", false, true, true},
	{"UPDATE t SET a = (@n := @n + 1)", false, true, true},
	{"SELECT @x, @@session.sql_mode", false, false, false},
	{"SELECT a INTO OUTFILE '/tmp/x' FROM t", false, false, false},
	{"/*!40101 SET NAMES utf8 */", false, true, true}, // PostgreSQL: a comment
	{"SELECT /*!50000 1 */", false, false, false},     // the text runs, and changes nothing
	{"SELECT /*M!100000 1 */", false, false, false},
	{"SELECT /*!40001 SQL_NO_CACHE */ a FROM t", false, false, false},
	{"SELECT 1 /*!50000 ; SET @x = 1 */", false, true, true},
	{"/*!50000SET autocommit = 0*/", false, true, true},
	{"SELECT /*! 1 /* c */ */", false, true, true}, // a comment in one: cannot lex
	{"SELECT /*! 1", false, true, true},            // left open: cannot lex
	{"SELECT /*+ MAX_EXECUTION_TIME(1) */ a FROM t", false, false, false},
	{"SELECT 'a\\'SET'", false, false, false},        // no SET can start a statement here
	{"SELECT 'a\\' SET @x = 1 '", false, true, true}, // MySQL: without escapes a quote is left open
	{"SELECT `SET` FROM t", false, false, false},
	{"SELECT \"a\\\"; SET @x = 1; \"", true, true, true}, // PostgreSQL: an identifier ends at the second quote
	{"# c\nSELECT 1", false, false, false},
	{"SELECT 1 # SET @x = 1", false, false, false},
	{"SELECT 1 # ; SET x.y = 1", true, false, true}, // PostgreSQL: # is an operator
	{"SELECT 1 -- SET @x = 1", false, false, false},
	{"SELECT 1 --; SET @x = 1", false, true, true}, // MySQL: --; is no comment

	// Lexical rules each server has its own way (issue 35).
	{"-- x\rSET ROLE admin", true, false, true}, // PostgreSQL ends -- at '\r'
	{"-- x\rSET search_path = evil, public", true, false, true},
	{"-- x\rCREATE TEMP TABLE accounts(a int)", true, false, true}, // MySQL: all one comment
	{"-- x\rSELECT pg_advisory_lock(1)", true, false, true},
	{"-- x\rSELECT set_config('statement_timeout','1',false)", true, false, true},
	{"SELECT 1 # x\r; SET x.y = 1", true, false, true},                      // MySQL: # ends at '\n' only
	{"SELECT 1 --\x7f'\nSET @x = 1; -- '", false, true, true},               // "--" then a byte only the charset classes
	{"SELECT 1$a$ $a$; SET ROLE admin; SELECT $a$ $a$", true, true, true},   // PostgreSQL: 1 and a tag
	{"SELECT '\\'', B'\\'; SET ROLE admin; --'", true, false, true},         // B'' never escapes
	{"SELECT 'C:\\', E'a'\n'\\''; SET ROLE admin; --' '", true, true, true}, // E'' continued keeps escaping
	{"SELECT E'a'\n'\\'', 'b' -- '\n", false, false, false},
	{"LOAD DATA INFILE 'x' INTO TABLE t", true, false, true},
	{"CALL p()", false, false, false},

	// Other databases (Any only).
	{"PRAGMA foreign_keys = ON", false, false, true},
	{"ATTACH DATABASE 'x.db' AS x", false, false, true},
	{"ALTER SESSION SET NLS_DATE_FORMAT = 'YYYY'", false, false, true},
	{"EXEC sp_getapplock @Resource = 'x', @LockMode = 'Exclusive'", false, false, true},
	{"BEGIN DBMS_SESSION.SET_CONTEXT('a', 'b', 'c'); END;", false, false, true},
}

func TestChangesSession(t *testing.T) {
	for _, tc := range sessionCases {
		for _, f := range []struct {
			name string
			f    Flavor
			want bool
		}{{"Postgres", Postgres, tc.pg}, {"MySQL", MySQL, tc.my}, {"Any", Any, tc.anyDB}} {
			if got := ChangesSession(tc.query, f.f); got != f.want {
				t.Errorf("ChangesSession(%q, %s) = %v, want %v", tc.query, f.name, got, f.want)
			}
		}
	}
}

// TestPrefilterFindsEveryChange checks that the quick scan never says no
// where the lexer says yes, on every case and on each case cut short.
func TestPrefilterFindsEveryChange(t *testing.T) {
	queries := make([]string, 0, len(sessionCases)+len(unicodeSessionCases))
	for _, tc := range sessionCases {
		queries = append(queries, tc.query)
	}
	for _, tc := range unicodeSessionCases {
		queries = append(queries, tc.query)
	}
	for _, query := range queries {
		for n := 0; n <= len(query); n++ {
			q := query[:n]
			for _, f := range []Flavor{Postgres, MySQL, Any} {
				if !mayChangeSession(q, f) && (scanTwice(q, false, f) && f&Postgres != 0 || scanTwice(q, true, f) && f&MySQL != 0) && !cannotLex(q, f) {
					t.Errorf("quick scan misses %q (flavor %d)", q, f)
				}
			}
		}
	}
}

func FuzzChangesSession(f *testing.F) {
	for _, tc := range sessionCases {
		f.Add(tc.query)
	}
	for _, tc := range unicodeSessionCases {
		f.Add(tc.query)
	}
	f.Fuzz(func(t *testing.T, q string) {
		for _, fl := range []Flavor{Postgres, MySQL, Any} {
			got := ChangesSession(q, fl)
			full := fl&Postgres != 0 && scanTwice(q, false, fl) || fl&MySQL != 0 && scanTwice(q, true, fl)
			if full && !got && !cannotLex(q, fl) {
				t.Fatalf("ChangesSession(%q, %d): the quick scan missed what the rules find", q, fl)
			}
		}
	})
}

// cannotLex reports text the lexer gives up on: the rules then say yes
// where the quick scan rightly finds nothing to change.
func cannotLex(q string, f Flavor) bool {
	for _, my := range []bool{false, true} {
		if my && f&MySQL == 0 || !my && f&Postgres == 0 {
			continue
		}
		for _, esc := range []bool{false, true} {
			l := newLexer(q, my, esc)
			for {
				t := l.next()
				if t.kind == kBad {
					return true
				}
				if t.kind == kEOF {
					break
				}
			}
		}
	}
	return false
}

func TestOnlySettings(t *testing.T) {
	for _, c := range []struct {
		query string
		want  bool
	}{
		{"SELECT 1", true},
		{"SET work_mem = '8MB'", true},
		{"SET SESSION work_mem TO DEFAULT", true},
		{"SET ROLE app", true},
		{"SET SESSION AUTHORIZATION app", true},
		{"RESET ALL", true},
		{"RESET work_mem", true},
		{"SELECT set_config('work_mem', '8MB', false)", true},
		{"SELECT set_config('a.b', $1, $2), 1", true},
		{"SET a.b = 1; SELECT set_config('x.y', 'z', false)", true},
		{"SELECT set_config('work_mem', '8MB', true)", true},
		{"SET LOCAL work_mem = '8MB'", true},
		{"SET search_path = pg_temp", false}, // pg_temp counts wherever it stands
		{"SET x = 1; LISTEN c", false},
		{"SELECT set_config('a.b', 'c', false), pg_advisory_lock(1)", false},
		{"SELECT set_config(set_config('a.b', 'c', false), 'd', false)", false},
		{"SELECT setval('s', 1)", false},
		{"CREATE TEMP TABLE t (a int)", false},
		{"DECLARE c CURSOR WITH HOLD FOR SELECT 1", false},
		{"PREPARE p AS SELECT 1", false},
		{"DISCARD ALL", false},
		{"DO $$BEGIN PERFORM set_config('a.b', 'c', false); END$$", false},
		{"SET", false},                        // cut short
		{"SELECT set_config('a', 'b'", false}, // cut short
		{"SELECT E'\\'' ; LISTEN c", false},
	} {
		if got := OnlySettings(c.query); got != c.want {
			t.Errorf("OnlySettings(%q) = %v, want %v", c.query, got, c.want)
		}
		if f := Of(c.query, Postgres); f.OnlySettings != c.want {
			t.Errorf("Of(%q).OnlySettings = %v, want %v", c.query, f.OnlySettings, c.want)
		}
	}
	// Every text the session rules call a change and OnlySettings
	// passes is a setting's statement; the rest of the cases hold one of
	// another kind or none.
	for _, c := range sessionCases {
		if !c.pg && !OnlySettings(c.query) {
			t.Errorf("OnlySettings(%q) = false for a text that changes nothing", c.query)
		}
	}
	if f := Of("SET x.y = 1", MySQL); f.OnlySettings {
		t.Error("Of(SET, MySQL).OnlySettings = true; only PostgreSQL's settings are read")
	}
}
