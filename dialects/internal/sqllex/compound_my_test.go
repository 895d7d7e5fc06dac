package sqllex

import (
	"slices"
	"testing"
)

// businessBody is a stored function of the usual shape: locals, a
// branch, a read into a local, writes, a result.
const businessBody = `BEGIN
  DECLARE total DECIMAL(10,2) DEFAULT 0;
  DECLARE n, m INT;
  DECLARE msg VARCHAR(64) CHARACTER SET utf8mb4 DEFAULT 'ok; SET @x = 1';
  IF qty <= 0 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'bad quantity';
  ELSEIF qty > 100 THEN
    SET total = qty * 0.9;
  ELSE
    SET total = qty, n = 1;
  END IF;
  SELECT COUNT(*) INTO n FROM orders WHERE customer = cust;
  INSERT INTO orders (customer, amount) VALUES (cust, total);
  UPDATE customers SET last_total = total WHERE id = cust;
  RETURN total + n;
END`

// TestReadRoutine: bodies read statement by statement; the harmless ones,
// and each kind of change or doubt.
func TestReadRoutine(t *testing.T) {
	params := []string{"qty", "Cust", "p_out"}
	for _, c := range []struct {
		body     string
		harmless bool
	}{
		{"RETURN 1", true},
		{"  return x * 2 + LENGTH(y)\n", true},
		{"RETURN(SELECT COUNT(*) FROM t WHERE a = x)", true},
		{"RETURN CONCAT('a', ';', 'SET @x = 1')", true},
		{"RETURN @@session.sql_mode", true},
		{"RETURN @v", true},
		{"BEGIN RETURN 1; END", true},
		{"BEGIN END", true},
		{businessBody, true},
		{"BEGIN DECLARE x INT; SET x := 5; RETURN x; END", true},
		{"BEGIN DECLARE time_zone INT DEFAULT 1; SET time_zone = 2; RETURN time_zone; END", true},
		{"BEGIN SET qty = qty + 1; RETURN qty; END", true},
		{"BEGIN SET `QTY` = 1; RETURN qty; END", true},
		{"lbl: BEGIN DECLARE i INT DEFAULT 0; l2: LOOP SET i = i + 1; IF i > 3 THEN LEAVE l2; END IF; ITERATE l2; END LOOP l2; RETURN i; END lbl", true},
		{"BEGIN DECLARE i INT DEFAULT 0; WHILE i < 10 DO SET i = i + 1; END WHILE; REPEAT SET i = i - 1; UNTIL i = 0 END REPEAT; RETURN i; END", true},
		{"BEGIN DECLARE r INT; CASE qty WHEN 1 THEN SET r = 1; WHEN 2 THEN SET r = CASE WHEN cust THEN 2 ELSE 3 END; ELSE SET r = 0; END CASE; RETURN r; END", true},
		{"BEGIN DECLARE r INT; CASE WHEN qty > 1 THEN SET r = 1; END CASE; RETURN r; END", true},
		{"BEGIN IF CASE WHEN qty THEN 1 ELSE 0 END = 1 THEN RETURN 1; END IF; RETURN 0; END", true},
		{"BEGIN DECLARE c CONDITION FOR SQLSTATE '45000'; DECLARE CONTINUE HANDLER FOR c, SQLEXCEPTION, NOT FOUND, 1062 BEGIN END; RETURN 1; END", true},
		{"BEGIN DECLARE EXIT HANDLER FOR SQLSTATE VALUE '23000' RETURN 0; RETURN 1; END", true},
		{"BEGIN DECLARE d INT; DECLARE cur CURSOR FOR SELECT a FROM t; OPEN cur; FETCH NEXT FROM cur INTO d; CLOSE cur; RETURN d; END", true},
		{"BEGIN DELETE FROM t WHERE a = qty; REPLACE INTO t VALUES (1); RETURN ROW_COUNT(); END", true},
		{"BEGIN CALL other_p(qty, p_out); RETURN 1; END", true},
		{"BEGIN CALL other_p; RETURN 1; END", true},
		{"BEGIN RESIGNAL; END", true},
		{"BEGIN DO SLEEP(0); END", true},
		{"BEGIN DECLARE x INT; SELECT a, b INTO x, qty FROM t LIMIT 1; RETURN x; END", true},

		// The session: user and system variables, locks, statements.
		{"BEGIN SET @v = 1; RETURN 1; END", false},
		{"BEGIN SET @@session.time_zone = '+01:00'; RETURN 1; END", false},
		{"BEGIN SET SESSION time_zone = '+01:00'; RETURN 1; END", false},
		{"BEGIN SET time_zone = '+01:00'; RETURN 1; END", false},
		{"BEGIN DECLARE x INT; SET x = 1, time_zone = '+01:00'; RETURN x; END", false},
		{"BEGIN SET NAMES latin1; RETURN 1; END", false},
		{"BEGIN DECLARE x INT; BEGIN DECLARE y INT; END; SET y = 1; RETURN x; END", false},
		{"BEGIN SET x = 1; DECLARE x INT; RETURN x; END", false},
		{"BEGIN DECLARE x INT; SET x = GET_LOCK('l', 0); RETURN x; END", false},
		{"RETURN GET_LOCK('l', 0)", false},
		{"RETURN LAST_INSERT_ID(5)", false},
		{"RETURN (@v := 1)", false},
		{"BEGIN SELECT 1 INTO @v; RETURN 1; END", false},
		{"BEGIN DECLARE x INT; SELECT 1 INTO x, @v; RETURN 1; END", false},
		{"BEGIN SELECT 1 INTO undeclared; RETURN 1; END", false},
		{"BEGIN SELECT a INTO OUTFILE '/tmp/x' FROM t; END", false},
		{"BEGIN PREPARE s FROM 'SELECT 1'; EXECUTE s; RETURN 1; END", false},
		{"BEGIN EXECUTE IMMEDIATE 'SET @v = 1'; RETURN 1; END", false},
		{"BEGIN COMMIT; END", false},
		{"BEGIN START TRANSACTION; INSERT INTO t VALUES (1); END", false},
		{"BEGIN LOCK TABLES t WRITE; END", false},
		{"BEGIN CREATE TEMPORARY TABLE tmp (a INT); RETURN 1; END", false},
		{"BEGIN DROP TABLE t; END", false},
		{"BEGIN USE other; END", false},
		{"BEGIN DECLARE d INT; DECLARE cur CURSOR FOR SELECT a FROM t; OPEN cur; FETCH cur INTO d; RETURN d; END", false},
		{"BEGIN CALL p(@out); RETURN 1; END", false},
		{"BEGIN DECLARE CONTINUE HANDLER FOR SQLEXCEPTION SET @failed = 1; RETURN 1; END", false},
		{"BEGIN GET DIAGNOSTICS CONDITION 1 @m = MESSAGE_TEXT; END", false},
		{"BEGIN FOR i IN 1..3 DO SET @v = i; END FOR; RETURN 1; END", false},
		{"BEGIN DECLARE x INT DEFAULT GET_LOCK('l', 0); RETURN x; END", false},
		{"BEGIN IF GET_LOCK('l', 0) THEN RETURN 1; END IF; RETURN 0; END", false},
		{"BEGIN WHILE RELEASE_LOCK('l') DO ITERATE x; END WHILE; END", false},

		// A reserved word after a '.' is a column's name, and END is no
		// reserved word: neither opens or closes a CASE, nor is INTO.
		{"BEGIN DECLARE x INT; SET x = (SELECT s.case FROM (SELECT 1 AS `case`) s), @v = 3; END", false},
		{"BEGIN DECLARE x INT; SET x = (SELECT s.end FROM (SELECT 1 AS `end`) s), @v = 3; END", false},
		{"BEGIN DECLARE x INT; SET x = (SELECT end FROM (SELECT 1 AS end) s), time_zone = '+01:00'; END", false},
		{"BEGIN DECLARE x INT; SELECT s.into x, x FROM (SELECT 1 AS `into`) s INTO x, @v; END", false},
		{"BEGIN DECLARE x TYPE OF s.case DEFAULT GET_LOCK('l', 0); RETURN x; END", false},
		{"BEGIN DECLARE x INT; SET x = (SELECT s.case FROM (SELECT 1 AS `case`) s), x = CASE WHEN end THEN 1 ELSE 2 END; RETURN x; END", true},
		{"BEGIN DECLARE x INT; SELECT s.into, end INTO x, x FROM (SELECT 1 AS `into`, 2 AS end) s; RETURN x; END", true},

		// Names fold as the server folds them: ASCII letters only. The
		// Kelvin sign is k to Unicode and another letter to MariaDB,
		// whose SET lock_wait_timeout set the session's variable.
		{"BEGIN DECLARE loc\u212a_wait_timeout INT; SET lock_wait_timeout = 7; RETURN 1; END", false},
		{"BEGIN DECLARE \u00c9t INT; SET \u00e9t = 7; RETURN 1; END", false},
		{"BEGIN DECLARE \u00c9t INT; SET \u00c9T = 7; RETURN 1; END", true},
		{"BEGIN SET P_OUT = 1; END", true},

		// Text the reader is unsure of.
		{"BEGIN RETURN 1;", false},
		{"BEGIN RETURN 1; END; RETURN 2", false},
		{"BEGIN IF 1 THEN RETURN 1; END; END", false},
		{"RETURN 'unterminated", false},
		{"BEGIN RETURN 1 END", false},
		{"RETURNS 1", false},
		{"", false},
		{"lbl: SET x = 1", false},
		{"BEGIN NOT ATOMIC RETURN 1; END", true},
	} {
		got := ReadRoutine(c.body, SQLMode{}, params)
		if got.Harmless != c.harmless {
			t.Errorf("ReadRoutine(%q).Harmless = %v, want %v", c.body, got.Harmless, c.harmless)
		}
	}
}

// TestReadRoutineCalls: the routines a body calls, for the catalog to
// prove harmless in turn; its words; whether it writes.
func TestReadRoutineCalls(t *testing.T) {
	r := ReadRoutine("BEGIN DECLARE x INT DEFAULT app.F1(2); SET x = `f2` (x) + lower('A'); CALL db.P1(x); CALL p2(); RETURN f1(x); END", SQLMode{}, nil)
	if !r.Harmless || !slices.Equal(r.Funcs, []string{"f1", "f2"}) || !slices.Equal(r.Procs, []string{"p1", "p2"}) || r.Writes {
		t.Errorf("ReadRoutine: %+v", r)
	}
	r = ReadRoutine(businessBody, SQLMode{}, []string{"qty", "cust"})
	if !r.Writes || !slices.Contains(r.Words, "orders") || !slices.Contains(r.Words, "customers") || len(r.Funcs) != 0 {
		t.Errorf("ReadRoutine(business): %+v", r)
	}
	// A built-in's name before white space may be a stored function's.
	if r := ReadRoutine("RETURN lower ('a')", SQLMode{}, nil); !slices.Equal(r.Funcs, []string{"lower"}) {
		t.Errorf("lower ('a'): Funcs %q", r.Funcs)
	}
}

// TestReadRoutineModes: a body is read in the sql_mode it was created
// with; in a mode the reader does not follow it is not harmless.
func TestReadRoutineModes(t *testing.T) {
	def, _ := ParseSQLMode("STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION")
	ansi, ok := ParseSQLMode("REAL_AS_FLOAT,PIPES_AS_CONCAT,ANSI_QUOTES,IGNORE_SPACE,ANSI")
	if !ok || !ansi.ANSIQuotes || ansi.NoBackslashEscapes {
		t.Fatalf("ParseSQLMode(ANSI) = %+v, %v", ansi, ok)
	}
	nbe, ok := ParseSQLMode("no_backslash_escapes")
	if !ok || !nbe.NoBackslashEscapes || nbe.ANSIQuotes {
		t.Fatalf("ParseSQLMode(no_backslash_escapes) = %+v, %v", nbe, ok)
	}
	for _, m := range []string{
		"PIPES_AS_CONCAT,ANSI_QUOTES,IGNORE_SPACE,ORACLE,NO_KEY_OPTIONS,NO_TABLE_OPTIONS,NO_FIELD_OPTIONS,NO_AUTO_CREATE_USER,SIMULTANEOUS_ASSIGNMENT",
		"PIPES_AS_CONCAT,ANSI_QUOTES,IGNORE_SPACE,MSSQL,NO_KEY_OPTIONS,NO_TABLE_OPTIONS,NO_FIELD_OPTIONS",
		"DB2", "POSTGRESQL", "MAXDB", "SOME_FUTURE_MODE",
	} {
		if _, ok := ParseSQLMode(m); ok {
			t.Errorf("ParseSQLMode(%q): ok, want a mode the reader does not follow", m)
		}
	}
	for _, c := range []struct {
		body      string
		mode      SQLMode
		harmless  bool
		funcs     []string
		modeLabel string
	}{
		// "…" is a string by default, a name under ANSI_QUOTES.
		{`RETURN "get_lock"`, def, true, nil, "default"},
		{`RETURN "get_lock"('x', 0)`, ansi, false, nil, "ansi"},
		{`RETURN "other_fn"()`, def, true, []string{"other_fn"}, "default"}, // no string is called
		{`RETURN "other_fn"()`, ansi, true, []string{"other_fn"}, "ansi"},
		{`BEGIN DECLARE "x" INT; SET "X" = 1; RETURN "x"; END`, ansi, true, nil, "ansi"},
		{`BEGIN SET "time_zone" = '+01:00'; RETURN 1; END`, ansi, false, nil, "ansi"},
		// A backslash in a string: the body is read both ways, and is
		// harmless only where both readings are. ROUTINE_DEFINITION
		// shows the body's '\\' as '\' in every mode: read with
		// escapes, that string ends at the next statement's quote,
		// and the SET @v between hides in it.
		{`RETURN CONCAT('a\', GET_LOCK('x', 0), '')`, nbe, false, nil, "no_backslash_escapes"},
		{`RETURN CONCAT('a\', other_fn(), '')`, nbe, false, nil, "no_backslash_escapes"},
		{`RETURN CONCAT('a\', other_fn(), '')`, def, false, nil, "default"},
		{`RETURN 'a\' || other_fn() || '\\'`, nbe, false, nil, "no_backslash_escapes"},
		{"BEGIN DECLARE x VARCHAR(9);\nSET x = '\\';\nSET @v = 1;\nSET x = ';#';\nEND", def, false, nil, "default"},
		{"BEGIN DECLARE x VARCHAR(9);\nSET x = '\\';\nSET @v = 1;\nSET x = ';#';\nEND", nbe, false, nil, "no_backslash_escapes"},
		{`RETURN CONCAT('a\nb', other_fn(), 'c\%d', 'e''f')`, def, true, []string{"other_fn"}, "default"},
		{`RETURN CONCAT('a\nb', other_fn(), 'c\%d')`, nbe, true, []string{"other_fn"}, "no_backslash_escapes"},
		// PIPES_AS_CONCAT changes no reading.
		{`RETURN 'a' || GET_LOCK('x', 0)`, ansi, false, nil, "ansi"},
		{`RETURN 'a' || 'b'`, ansi, true, nil, "ansi"},
	} {
		r := ReadRoutine(c.body, c.mode, nil)
		if r.Harmless != c.harmless || r.Harmless && !slices.Equal(r.Funcs, c.funcs) {
			t.Errorf("ReadRoutine(%q) in %s: %+v; want harmless %v, calls %q", c.body, c.modeLabel, r, c.harmless, c.funcs)
		}
	}
}

// FuzzReadRoutine: the reader never panics, whatever the body and mode.
func FuzzReadRoutine(f *testing.F) {
	f.Add(businessBody, false, false)
	f.Add("BEGIN IF a THEN CASE WHEN b THEN LOOP LEAVE x; END LOOP; END CASE; END IF; END", true, false)
	f.Add(`RETURN "x"('\'); END`, true, true)
	f.Add("l: REPEAT UNTIL END REPEAT", false, true)
	f.Add("BEGIN DECLARE CONTINUE HANDLER FOR SQLSTATE", false, false)
	f.Fuzz(func(t *testing.T, body string, ansi, nbe bool) {
		_ = ReadRoutine(body, SQLMode{ANSIQuotes: ansi, NoBackslashEscapes: nbe}, []string{"p"})
	})
}

// TestDoubleQuotedCall: a statement's "f"(…) is a call of f, as the server
// reads it under ANSI_QUOTES (a session may have it on); no string can be
// called in the default mode, so reading it as a name costs nothing.
func TestDoubleQuotedCall(t *testing.T) {
	for q, want := range map[string]bool{
		`SELECT "get_lock"('x', 0)`:  true,
		`SELECT "get_lock" ('x', 0)`: true,
		`SELECT "get_lock"`:          false,
		`SELECT "a(b)"`:              false,
	} {
		if got := ChangesSession(q, MySQL); got != want {
			t.Errorf("ChangesSession(%q) = %v, want %v", q, got, want)
		}
	}
	if got, ok := UnknownCallsOf(`SELECT "my_f"(1), "x"`, MySQL); !ok || !slices.Equal(got, []string{"my_f"}) {
		t.Errorf(`UnknownCallsOf("my_f"(1)) = %q, %v; want [my_f]`, got, ok)
	}
	if CallsOf(`SELECT "my_f"(1)`, MySQL) != CallsUnknown {
		t.Error(`"my_f"(1): not a call`)
	}
}
