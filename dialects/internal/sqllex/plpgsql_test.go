package sqllex

import (
	"slices"
	"testing"
)

// plBusiness is a PL/pgSQL function of the business-logic shape: it
// changes tables, not the session.
const plBusiness = `
DECLARE
	v_balance numeric(12,2);
	v_limit CONSTANT numeric := 1000;
	v_note text DEFAULT 'none';
	v_n int = 0;
	v_row accounts%ROWTYPE;
BEGIN
	SELECT balance INTO STRICT v_balance FROM accounts WHERE id = p_id FOR UPDATE;
	IF v_balance + p_amount > v_limit THEN
		RAISE NOTICE 'over the limit: % + %', v_balance, p_amount;
		v_note := 'capped';
		p_amount := v_limit - v_balance;
	ELSIF p_amount < 0 THEN
		RAISE EXCEPTION 'negative amount %', p_amount USING ERRCODE = '22023', HINT = 'pass a positive one';
	ELSE
		v_note = upper(v_note);
	END IF;
	UPDATE accounts SET balance = balance + p_amount WHERE id = p_id RETURNING balance INTO v_balance;
	INSERT INTO ledger (account, amount, note) VALUES (p_id, p_amount, v_note);
	GET DIAGNOSTICS v_n = ROW_COUNT;
	RETURN v_balance;
END;
`

// plCases: a body, whether it reads as harmless, and the unknown calls it
// reports.
var plCases = []struct {
	body  string
	ok    bool
	calls []string
}{
	{plBusiness, true, nil},
	{"BEGIN RETURN 1; END", true, nil},
	{"begin return 1; end;", true, nil},
	{"\n  BEGIN\n RETURN $1 + 1;\n END\n", true, nil},
	{"<<outer>> DECLARE x int; BEGIN x := 1; RETURN x; END outer", true, nil},
	{"#variable_conflict use_column\nBEGIN RETURN 1; END", true, nil},
	{"#print_strict_params on\n#option dump\nBEGIN RETURN 1; END", true, nil},
	{"#variable_conflict maybe\nBEGIN RETURN 1; END", false, nil},
	{"#unknown_option x\nBEGIN RETURN 1; END", false, nil},
	{"DECLARE a int := helper(1); BEGIN RETURN a; END", true, []string{"helper"}},
	{"DECLARE a int; BEGIN a := other.helper2(1) + helper(2); PERFORM helper(3); RETURN a; END", true, []string{"helper2", "helper"}},
	{"DECLARE a int; BEGIN a := \"Quoted\"(1); RETURN a; END", true, []string{"Quoted"}},
	{"BEGIN PERFORM pg_sleep(0); RETURN 1; END", true, nil},
	{"DECLARE a int[]; BEGIN a[1] := 2; a[helper(1)] := 3; RETURN a[1]; END", true, []string{"helper"}},
	{"DECLARE r record; BEGIN r.x := 1; RETURN 1; END", true, nil},
	// Control structures.
	{"DECLARE i int; s int := 0; BEGIN FOR i IN 1..10 LOOP s := s + i; END LOOP; RETURN s; END", true, nil},
	{"DECLARE i int; BEGIN FOR i IN REVERSE 10 .. 1 BY 2 LOOP CONTINUE WHEN i = 4; EXIT WHEN i < 2; END LOOP; RETURN 1; END", true, nil},
	{"DECLARE r record; BEGIN FOR r IN SELECT a FROM t LOOP RETURN NEXT r; END LOOP; RETURN; END", true, nil},
	{"DECLARE r record; BEGIN FOR r IN EXECUTE 'SELECT 1' LOOP END LOOP; RETURN 1; END", false, nil},
	{"DECLARE r record; BEGIN FOR r IN curs LOOP END LOOP; RETURN 1; END", false, nil},
	{"DECLARE x int; BEGIN FOREACH x SLICE 1 IN ARRAY $1 LOOP NULL; END LOOP; RETURN 1; END", true, nil},
	{"DECLARE x int; BEGIN FOREACH x IN ARRAY ARRAY[1,2] LOOP NULL; END LOOP; RETURN 1; END", true, nil},
	{"DECLARE i int := 0; BEGIN <<l>> LOOP i := i + 1; EXIT l WHEN i > 3; END LOOP l; WHILE i > 0 LOOP i := i - 1; END LOOP; RETURN i; END", true, nil},
	{"BEGIN CASE $1 WHEN 1, 2 THEN RETURN 1; WHEN 3 THEN NULL; ELSE RETURN 0; END CASE; RETURN 2; END", true, nil},
	{"BEGIN CASE WHEN $1 > 1 THEN RETURN 1; END CASE; RETURN 2; END", true, nil},
	{"BEGIN IF CASE WHEN $1 > 0 THEN true ELSE false END THEN RETURN 1; END IF; RETURN 0; END", true, nil},
	{"BEGIN IF $1 THEN IF $2 THEN RETURN 1; END IF; ELSEIF $3 THEN RETURN 2; ELSE RETURN 3; END IF; END", true, nil},
	{"BEGIN IF EXISTS (SELECT 1 FROM t WHERE a = $1) THEN RETURN 1; END IF; RETURN 0; END", true, nil},
	{"BEGIN BEGIN RETURN 1 / 0; EXCEPTION WHEN division_by_zero OR SQLSTATE '22012' THEN RETURN 0; WHEN others THEN RAISE; END; END", true, nil},
	{"BEGIN RETURN 1; EXCEPTION WHEN others THEN GET STACKED DIAGNOSTICS m = MESSAGE_TEXT; RAISE WARNING '%', m; RETURN 0; END", true, nil},
	{"BEGIN ASSERT $1 > 0, 'positive'; RETURN QUERY SELECT 1; RETURN QUERY WITH x AS (SELECT 1) SELECT * FROM x; END", true, nil},
	{"BEGIN RAISE division_by_zero; END", true, nil},
	{"BEGIN RAISE SQLSTATE '22012' USING MESSAGE = 'x'; END", true, nil},
	{"BEGIN RAISE EXCEPTION USING MESSAGE = helper(1); END", true, []string{"helper"}},
	{"BEGIN RAISE NOTICE 'x %', helper(2); RETURN 1; END", true, []string{"helper"}},
	{"DECLARE x int; BEGIN DELETE FROM t WHERE a = 1 RETURNING a INTO x; MERGE INTO t USING u ON t.a = u.a WHEN MATCHED THEN DELETE; RETURN x; END", true, nil},
	// Quoting: strings, dollar quotes, comments that hide statements.
	{"BEGIN RETURN 'END; SET search_path = x; BEGIN'; END", true, nil},
	{"BEGIN RETURN $q$ EXECUTE 'x'; $q$ || $$;$$; END", true, nil},
	{"BEGIN -- SET role x;\n RETURN 1; /* EXECUTE 'x'; /* nested */ COMMIT; */ END", true, nil},
	{"BEGIN -- a comment ends at a carriage return\r SET search_path = x; RETURN 1; END", false, nil},
	{"BEGIN RETURN 'it''s'; END", true, nil},
	{"BEGIN RETURN E'a\\'b'; END", true, nil},
	{"BEGIN RETURN 'a\\'; END", false, nil},
	{"BEGIN RETURN 'unterminated; END", false, nil},
	{"BEGIN RETURN $x$ unterminated; END", false, nil},
	{"BEGIN /* unterminated RETURN 1; END", false, nil},
	{`BEGIN RETURN "set_config"; END`, false, nil},
	{`BEGIN PERFORM U&"set\005fconfig"('a.b', 'x', false); RETURN 1; END`, false, nil},
	{"DECLARE i int; BEGIN FOR i IN 1..helper(2) LOOP NULL; END LOOP; RETURN (SELECT other(1)); END", true, []string{"helper", "other"}},
	// INTO and its target leave the statement the server runs wherever
	// they stand: a call right after a target named like a word before
	// which a '(' opens a column list (key, index, view) is still a call.
	{"DECLARE key int; BEGIN SELECT INTO key helper(); RETURN key; END", true, []string{"helper"}},
	{"DECLARE index int; BEGIN SELECT INTO STRICT index helper(1) FROM t; RETURN 1; END", true, []string{"helper"}},
	{"DECLARE r record; BEGIN SELECT INTO r.view, key helper(1); RETURN 1; END", true, []string{"helper"}},
	{"DECLARE x int; BEGIN INSERT INTO t SELECT INTO function helper(1); RETURN 1; END", true, []string{"helper"}},
	{"DECLARE r record; BEGIN FOR r IN SELECT INTO key helper() LOOP END LOOP; RETURN QUERY SELECT INTO key helper2(); END", true, []string{"helper", "helper2"}},
	{"DECLARE key int; BEGIN SELECT INTO key pg_advisory_lock(1); RETURN 1; END", false, nil},
	{"DECLARE key int; BEGIN SELECT INTO key count(*) FROM audited; RETURN 1; END", false, nil},
	// Changes.
	{"BEGIN SET search_path = x; RETURN 1; END", false, nil},
	{"BEGIN SET LOCAL search_path = x; RETURN 1; END", false, nil},
	{"BEGIN RESET search_path; RETURN 1; END", false, nil},
	{"BEGIN PERFORM set_config('search_path', 'x', true); RETURN 1; END", false, nil},
	{"BEGIN PERFORM pg_catalog.set_config('a.b', 'x', false); RETURN 1; END", false, nil},
	{"BEGIN EXECUTE 'SELECT 1'; RETURN 1; END", false, nil},
	{"BEGIN RETURN QUERY EXECUTE 'SELECT 1'; END", false, nil},
	{"DECLARE c CURSOR FOR SELECT 1; BEGIN RETURN 1; END", false, nil},
	{"DECLARE c refcursor; BEGIN OPEN c FOR SELECT 1; RETURN 1; END", false, nil},
	{"DECLARE c NO SCROLL CURSOR (k int) FOR SELECT k; BEGIN RETURN 1; END", false, nil},
	{"BEGIN OPEN c FOR SELECT 1; RETURN 1; END", false, nil},
	{"BEGIN CLOSE c; RETURN 1; END", false, nil},
	{"BEGIN FETCH c INTO x; RETURN 1; END", false, nil},
	{"BEGIN CALL p(); RETURN 1; END", false, nil},
	{"BEGIN COMMIT; END", false, nil},
	{"BEGIN ROLLBACK; END", false, nil},
	{"BEGIN LISTEN chan; RETURN 1; END", false, nil},
	{"BEGIN PREPARE s AS SELECT 1; RETURN 1; END", false, nil},
	{"BEGIN CREATE TABLE x (a int); RETURN 1; END", false, nil},
	{"BEGIN DROP TABLE x; RETURN 1; END", false, nil},
	{"BEGIN ALTER TABLE x ADD COLUMN b int; RETURN 1; END", false, nil},
	{"BEGIN CREATE TEMP TABLE x (a int); RETURN 1; END", false, nil},
	{"BEGIN SELECT 1 INTO TEMP x; RETURN 1; END", false, nil},
	{"BEGIN PERFORM pg_advisory_lock(1); RETURN 1; END", false, nil},
	{"BEGIN PERFORM setval('s', 1); RETURN 1; END", false, nil},
	{"BEGIN PERFORM query_to_xml('select 1', true, true, ''); RETURN 1; END", false, nil},
	{"BEGIN PERFORM dblink_exec('x'); RETURN 1; END", false, nil},
	{"BEGIN INSERT INTO audited VALUES (1); RETURN 1; END", false, nil},
	{"DECLARE a int := (SELECT count(*) FROM audited); BEGIN RETURN a; END", false, nil},
	{"DECLARE a audited%ROWTYPE; BEGIN RETURN 1; END", false, nil},
	{"BEGIN LOCK TABLE t; RETURN 1; END", false, nil},
	{"BEGIN DISCARD ALL; END", false, nil},
	{"BEGIN DO $$ BEGIN END $$; END", false, nil},
	{"BEGIN IF $1 THEN SET role x; END IF; RETURN 1; END", false, nil},
	{"BEGIN LOOP EXECUTE 'x'; END LOOP; END", false, nil},
	{"BEGIN RETURN 1; EXCEPTION WHEN others THEN PERFORM pg_advisory_lock(1); RETURN 0; END", false, nil},
	// Not read with certainty.
	{"", false, nil},
	{"RETURN 1;", false, nil},
	{"BEGIN RETURN 1; END; RETURN 2;", false, nil},
	{"BEGIN RETURN 1;", false, nil},
	{"BEGIN IF x THEN RETURN 1; END; END", false, nil},
	{"BEGIN IF x THEN RETURN 1; END IF END", false, nil},
	{"BEGIN FOR i IN 1..2 LOOP NULL; END; END", false, nil},
	{"BEGIN CASE WHEN x THEN NULL; END; END", false, nil},
	{"BEGIN x; END", false, nil},
	{"BEGIN (SELECT 1); END", false, nil},
	{"BEGIN \"x\"; END", false, nil},
	{"BEGIN RETURN; NULL END", false, nil},
	{"BEGIN RAISE NOTICE 'x' 'y'; END", false, nil},
	{"BEGIN GET DIAGNOSTICS x = f(1); END", false, nil},
	{"BEGIN RETURN 1; EXCEPTION WHEN f(x) THEN NULL; END", false, nil},
	{"<<a>> <<b>> BEGIN RETURN 1; END", false, nil},
	{"<<a BEGIN RETURN 1; END", false, nil},
	{"BEGIN <<l>> NULL; END", false, nil},
	{"BEGIN x := ; END", false, nil},
	{"BEGIN x[1 := 2; END", false, nil},
}

func TestPLpgSQLBody(t *testing.T) {
	s := &Shadows{Names: map[string]struct{}{"audited": {}}}
	for _, tc := range plCases {
		calls, ok := PLpgSQLBody(tc.body, s)
		if ok != tc.ok || ok && !slices.Equal(calls, tc.calls) {
			t.Errorf("PLpgSQLBody(%q) = %q, %v; want %q, %v", tc.body, calls, ok, tc.calls, tc.ok)
		}
	}
	if _, ok := PLpgSQLBody("BEGIN RETURN 1; END", nil); ok {
		t.Error("no catalog read: nothing is harmless")
	}
	if _, ok := PLpgSQLBody("BEGIN RETURN 1 + 1; END", &Shadows{Ops: []string{"+"}}); ok {
		t.Error("a user's operator: not harmless")
	}
	if _, ok := PLpgSQLBody("BEGIN CASE $1 WHEN 1 THEN RETURN 1; END CASE; RETURN 0; END", &Shadows{Ops: []string{"="}}); ok {
		t.Error("CASE x WHEN a runs x IN (a), a user's = : not harmless")
	}
	if _, ok := PLpgSQLBody("BEGIN CASE WHEN $1 > 1 THEN RETURN 1; END CASE; RETURN 0; END", &Shadows{Ops: []string{"="}}); !ok {
		t.Error("a searched CASE runs no =: harmless")
	}
	if _, ok := PLpgSQLBody("DECLARE a int; BEGIN a := 1; RETURN a; END", &Shadows{All: true}); ok {
		t.Error("an implicit user cast: not harmless")
	}
}

// TestPLpgSQLNesting: nesting past the bound is a change, not a deep
// recursion.
func TestPLpgSQLNesting(t *testing.T) {
	s := &Shadows{}
	body := "BEGIN "
	for range 1000 {
		body += "IF true THEN "
	}
	body += "RETURN 1;"
	for range 1000 {
		body += " END IF;"
	}
	body += " END"
	if _, ok := PLpgSQLBody(body, s); ok {
		t.Error("1000 nested IFs read as harmless")
	}
	if _, ok := PLpgSQLBody("BEGIN IF true THEN IF true THEN RETURN 1; END IF; END IF; END", s); !ok {
		t.Error("two nested IFs not read")
	}
}

func TestSQLBody(t *testing.T) {
	s := &Shadows{Names: map[string]struct{}{"audited": {}}}
	for _, tc := range []struct {
		body  string
		ok    bool
		calls []string
	}{
		{"SELECT $1 + 1", true, nil},
		{"SELECT helper($1), s.other(2)", true, []string{"helper", "other"}},
		{"SELECT set_config('a.b', 'x', false)", false, nil},
		{"INSERT INTO audited VALUES (1)", false, nil},
		{"CREATE TABLE x (a int)", false, nil},
		{"CALL p()", false, nil},
		{"  ", false, nil},
	} {
		calls, ok := SQLBody(tc.body, s)
		if ok != tc.ok || ok && !slices.Equal(calls, tc.calls) {
			t.Errorf("SQLBody(%q) = %q, %v; want %q, %v", tc.body, calls, ok, tc.calls, tc.ok)
		}
	}
}

// FuzzPLpgSQLBody: any text is read without a panic, and what reads as
// harmless still does with a catalog that marks nothing more.
func FuzzPLpgSQLBody(f *testing.F) {
	for _, tc := range plCases {
		f.Add(tc.body)
	}
	s := &Shadows{Names: map[string]struct{}{"audited": {}}}
	f.Fuzz(func(t *testing.T, body string) {
		calls, ok := PLpgSQLBody(body, s)
		if !ok && len(calls) != 0 {
			t.Errorf("PLpgSQLBody(%q): calls %q without ok", body, calls)
		}
	})
}
