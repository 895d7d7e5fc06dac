package integration

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/dialects"
)

// TestNeverDirtyCatalogWindow (issue 45, the first limit of
// docs/design.md's "Not covered at the defaults"): an overload of a listed
// built-in that another client made less than dialects.CatalogTTL ago may
// go unseen at the defaults, since the catalog's last reading is older;
// pool_reset_always covers it at once, and at the defaults it is seen once
// the reading is due, within CatalogTTL and the pool's next health check.
func TestNeverDirtyCatalogWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the catalog's reading to be due (5 s)")
	}
	forServer(t, "postgres", func(t *testing.T, s server) {
		always := sql.OpenDB(pooldriver.New(withParams(s.dsn, "pool_max_conns=1", "pool_reset_always=true")))
		defer always.Close()
		// The health check of idle connections reads a due catalog again
		// (every 30 s by default).
		defaults := sql.OpenDB(pooldriver.New(withParams(s.dsn, "pool_max_conns=1", "pool_health_check_period=1s")))
		defer defaults.Close()
		clean := nextUser(t, defaults, "SELECT current_setting('search_path')") // and the catalog read
		nextUser(t, always, "SELECT 1")

		// Made by another client, not through either pool.
		s.adminExec(t, "CREATE FUNCTION public.to_hex(boolean) RETURNS text LANGUAGE sql AS "+
			"$$ SELECT set_config('search_path', 'pg_catalog, public', false) $$")
		t.Cleanup(func() {
			if _, err := s.admin(t).ExecContext(context.Background(), "DROP FUNCTION public.to_hex(boolean)"); err != nil {
				t.Errorf("dropping public.to_hex(boolean): %v", err)
			}
		})
		_, err := always.ExecContext(ctx(t), "SELECT to_hex(true)")
		require.NoError(t, err)
		assert.Equal(t, clean, nextUser(t, always, "SELECT current_setting('search_path')"),
			"pool_reset_always: the next user's search_path")

		deadline := time.Now().Add(dialects.CatalogTTL + 10*time.Second)
		leaked := 0
		for {
			_, err := defaults.ExecContext(ctx(t), "SELECT to_hex(true)")
			require.NoError(t, err)
			got := nextUser(t, defaults, "SELECT current_setting('search_path')")
			if got == clean {
				break
			}
			leaked++
			if time.Now().After(deadline) {
				t.Fatalf("at the defaults the overload is still unseen %v after it was made: the next user's search_path is %q", dialects.CatalogTTL+10*time.Second, got)
			}
			time.Sleep(50 * time.Millisecond) // a statement now and then, as a service would send
		}
		t.Logf("at the defaults: %d statements leaked before the catalog's reading was due (CatalogTTL %v)", leaked, dialects.CatalogTTL)
	})
}
