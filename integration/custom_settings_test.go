package integration

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A custom setting's name (app.tenant) that a session set, with SET LOCAL
// in a transaction, set_config(…, true) or a function's SET clause, stays
// defined in the session whatever resets it: current_setting(name, true)
// answers '' where a new session answers NULL, and the RLS idiom
// current_setting('app.tenant', true)::int fails (22P02) for the next user
// only. Each case here lets a first user set a name of its own, then asks,
// as the next user of the one connection (pool_max_conns=1), what
// current_setting answers, and what a new connection of the same pool
// answers as its first statement: they must be the same, in every mode
// (dirtyModes), and the idiom that reads alike everywhere,
// nullif(current_setting(name, true), ''), must give NULL to both.

// customCase is one way of setting a name: dirty returns what the first
// user runs for name.
type customCase struct {
	name  string
	dirty func(t *testing.T, s server, name string) func(ctx context.Context, r runner) error
}

var customCases = []customCase{
	{"SET LOCAL", func(_ *testing.T, _ server, name string) func(ctx context.Context, r runner) error {
		return inTx("SET LOCAL "+name+" = '42'", "SELECT pg_catalog.current_setting('"+name+"')")
	}},
	{"set_config", func(_ *testing.T, _ server, name string) func(ctx context.Context, r runner) error {
		return execAll("SELECT pg_catalog.set_config('" + name + "', '42', true)")
	}},
	{"function SET clause", func(t *testing.T, s server, name string) func(ctx context.Context, r runner) error {
		// Created on the admin connection: no statement of the pool's
		// shows the name.
		fn := routine(t, s, "FUNCTION", "pd_custom",
			"() RETURNS text LANGUAGE sql SET "+name+" = '42' AS $$ SELECT pg_catalog.current_setting('"+name+"') $$")
		return execAll("SELECT " + fn + "()")
	}},
}

func TestCustomSettingsNextUser(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		for _, cc := range customCases {
			t.Run(cc.name, func(t *testing.T) {
				for _, m := range dirtyModes {
					t.Run(m.name, func(t *testing.T) {
						// A name of this run's own: the names are known per
						// server and database, across pools.
						name := "pd_custom." + unique("t")
						dirty := cc.dirty(t, s, name)
						db := m.open(t, s, s.dsn)
						defer db.Close()
						require.Equal(t, "<NULL>", customAsk(t, db, name), "before anyone set it")
						require.NoError(t, m.run(ctx(t), db, dirty), "the first user's statements")
						next := customAsk(t, db, name)
						assert.Equal(t, "<NULL>", idiom(t, db, name), "the next user: nullif(current_setting(name, true), '')")
						fresh, freshIdiom := customFresh(t, s, db, name)
						assert.Equal(t, fresh, next, "the next user sees what a new connection of the pool sees")
						assert.Equal(t, "<NULL>", freshIdiom, "a new connection: nullif(current_setting(name, true), '')")
						t.Logf("the next user sees %q, a new connection %q", next, fresh)
					})
				}
			})
		}
	})
}

// customAsk returns current_setting(name, true) as the next user of db,
// "<NULL>" for NULL.
func customAsk(t *testing.T, db *sql.DB, name string) string {
	t.Helper()
	return nextUser(t, db, "SELECT coalesce(pg_catalog.current_setting('"+name+"', true), '<NULL>')")
}

// idiom returns the idiom (current_setting(name, true), NULL where
// empty) as the next user of db, "<NULL>" for NULL.
func idiom(t *testing.T, db *sql.DB, name string) string {
	t.Helper()
	return nextUser(t, db, "SELECT coalesce(nullif(pg_catalog.current_setting('"+name+"', true), ''), '<NULL>')")
}

// customFresh ends the session of db's one connection from the server's
// side and returns, as the first statement of the connection the pool
// opens in its place, current_setting(name, true) and the idiom's
// answer (NULL where it is empty).
func customFresh(t *testing.T, s server, db *sql.DB, name string) (setting, idiom string) {
	t.Helper()
	pid := nextUser(t, db, "SELECT pg_catalog.pg_backend_pid()::text")
	s.adminExec(t, "SELECT pg_catalog.pg_terminate_backend("+pid+", 10000)")
	cs := "pg_catalog.current_setting('" + name + "', true)"
	ask := "SELECT pg_catalog.pg_backend_pid()::text || ':' || coalesce(" + cs + ", '<NULL>') || ':' || coalesce(nullif(" + cs + ", ''), '<NULL>')"
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got string
		err := db.QueryRowContext(ctx(t), ask).Scan(&got)
		if err == nil {
			parts := strings.SplitN(got, ":", 3)
			require.Len(t, parts, 3, got)
			require.NotEqual(t, pid, parts[0], "the pool still has the ended session")
			return parts[1], parts[2]
		}
		// The statement that found the session ended fails: the next one
		// gets the new connection.
		require.True(t, time.Now().Before(deadline), fmt.Sprintf("no new connection: %v", err))
	}
}
