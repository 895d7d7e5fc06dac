package sqllex

import "testing"

func TestPathUseOf(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  PathUse
	}{
		{"SELECT 1", 0},
		{"SET LOCAL search_path = pg_temp", SetsPath},
		{"SET LOCAL search_path TO app, public", SetsPath},
		{`SET LOCAL "search_path" = 'pg_temp'`, SetsPath},
		{"SET search_path = app", SetsPath},
		{"SET LOCAL SCHEMA 'pg_temp'", SetsPath},
		{"SET LOCAL app.tenant = '42'", 0},
		{"SET LOCAL statement_timeout = 5", 0},
		{"SELECT set_config('search_path', 'pg_temp', true)", SetsPath},
		{"SELECT pg_catalog.set_config($1, $2, true)", SetsPath},
		{"SELECT set_config('app.tenant', '42', true)", SetsPath},
		{"CREATE TABLE t (a int)", MakesInPath},
		{"CREATE TABLE IF NOT EXISTS t (a int)", MakesInPath},
		{"CREATE UNLOGGED TABLE t AS SELECT 1", MakesInPath},
		{"create or replace view v as select 1", MakesInPath},
		{`CREATE TABLE "T" (a int)`, MakesInPath},
		{"CREATE SEQUENCE s", MakesInPath},
		{"CREATE TABLE app.t (a int)", 0},
		{`CREATE TABLE "app"."t" (a int)`, 0},
		{"CREATE TEMP TABLE t (a int)", 0},
		{"CREATE INDEX ON t (a)", 0},
		{"CREATE UNIQUE INDEX i ON t (a)", 0},
		{"CREATE SCHEMA app", 0},
		{"SELECT a INTO t FROM u", MakesInPath},
		{"SELECT a INTO app.t FROM u", 0},
		{"INSERT INTO t VALUES (1)", 0},
		{"WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x", 0},
		{"MERGE INTO t USING u ON true WHEN MATCHED THEN DO NOTHING", 0},
		{"SET LOCAL search_path = pg_temp; CREATE TABLE t AS SELECT 1", SetsPath | MakesInPath},
		{"SELECT set_config('search_path', 'pg_temp', true); SELECT 1 INTO t", SetsPath | MakesInPath},
		{"SELECT 'create table t' AS s", 0},
	} {
		if got := PathUseOf(tc.query); got != tc.want {
			t.Errorf("PathUseOf(%q) = %b, want %b", tc.query, got, tc.want)
		}
	}
	if !(SetsPath | MakesInPath).Together() || SetsPath.Together() || MakesInPath.Together() {
		t.Error("Together: both uses, and only both")
	}
}
