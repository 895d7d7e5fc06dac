package integration

import (
	"testing"
)

// TestNeverDirtyPostgresTableWithoutTemp: a table made without the word
// TEMP that search_path puts in pg_temp (a setting of it, LOCAL, in the
// same transaction): CREATE TABLE … AS and SELECT … INTO, in one text or
// as statements of their own in one *sql.Tx, and a LANGUAGE sql function
// whose SET clause does it. The
// next user's session has no temporary relation.
func TestNeverDirtyPostgresTableWithoutTemp(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		temps := asks("SELECT count(*) FROM pg_catalog.pg_class WHERE relnamespace = pg_catalog.pg_my_temp_schema()")
		local := "SELECT set_config('search_path', 'pg_temp', true)"
		t.Run("CREATE TABLE AS", func(t *testing.T) {
			checkDenied(t, s, s.dsn, denyCase{dirty: execAll(local + "; CREATE TABLE pd_leak AS SELECT 1 AS a"), observe: temps, want: "0", shown: true})
		})
		t.Run("SELECT INTO", func(t *testing.T) {
			checkDenied(t, s, s.dsn, denyCase{dirty: execAll("SET LOCAL search_path = pg_temp; SELECT 1 AS a INTO pd_leak"), observe: temps, want: "0", shown: true})
		})
		t.Run("statements of their own", func(t *testing.T) {
			checkDenied(t, s, s.dsn, denyCase{dirty: inTx(local, "CREATE TABLE pd_leak (a int)"), observe: temps, want: "0", shown: true})
		})
		t.Run("SET LOCAL, then SELECT INTO", func(t *testing.T) {
			checkDenied(t, s, s.dsn, denyCase{dirty: inTx("SET LOCAL search_path = 'pg_temp'", "SELECT 1 AS a INTO pd_leak"), observe: temps, want: "0", shown: true})
		})
		t.Run("a function's SET clause", func(t *testing.T) {
			d := newDDL(t, s)
			fn := unique("pd_maketemp")
			d.add("CREATE FUNCTION public."+fn+"() RETURNS int LANGUAGE sql SET search_path = pg_temp, public AS $$ CREATE TABLE pd_leak (a int); SELECT 1 $$",
				"DROP FUNCTION public."+fn+"()")
			d.apply()
			checkDenied(t, s, s.dsn, denyCase{dirty: execAll("SELECT public." + fn + "()"), observe: temps, want: "0"})
		})
	})
}
