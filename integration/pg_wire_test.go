package integration

import (
	"bytes"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/internal/faultproxy"
)

// The PostgreSQL cases of issue 21 where pooldriver read a connection's
// state from a statement's text, or took pgx's "safe to retry" at its
// word: each runs on the real server, through the plain driver where it
// shows the fault, and through pooldriver (New and Wrap of pgx's stdlib).

// TestPgWireNoDuplicateExecution (issue 21, item 5): the server applies an
// INSERT, its reply is lost and the connection cut, on a pool of one.
// pgx's stdlib reports driver.ErrBadConn (pgx's NextResult drops the read
// error, which closed the connection, and the next read reports "conn
// closed", marked safe to retry), so database/sql runs the INSERT again on
// a new connection: nil, and two rows. pooldriver sees that the
// statement's bytes reached the server: an error, and exactly one row;
// and the pool serves the next statement.
func TestPgWireNoDuplicateExecution(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		for _, st := range []struct {
			name  string
			query string // %s: the table
			args  []any
		}{
			{"simple protocol", "INSERT INTO %s VALUES ('x')", nil},
			{"extended protocol", "INSERT INTO %s VALUES ($1)", []any{"x"}},
		} {
			for _, f := range allFlavours {
				t.Run(st.name+"/"+string(f), func(t *testing.T) {
					tn := newTenant(t, s)
					tbl := s.table(t, "dup", "v text")
					px, err := faultproxy.New(serverAddr(t, s))
					require.NoError(t, err)
					t.Cleanup(px.Close)
					db := openOneConn(t, s, f, throughProxy(t, tn.base, px.Addr()))
					t.Cleanup(func() { closeAndDrain(t, db, tn.backends, tn.kill) })
					require.NoError(t, db.PingContext(ctx(t)))

					// The reply to the first INSERT only; database/sql's
					// retry passes.
					var armed atomic.Bool
					armed.Store(true)
					px.SetFilter(func(dir faultproxy.Direction, b []byte) faultproxy.Verdict {
						if dir == faultproxy.ToClient && bytes.Contains(b, []byte("INSERT 0 1")) && armed.CompareAndSwap(true, false) {
							return faultproxy.DropAndCut
						}
						return faultproxy.Pass
					})
					_, err = db.ExecContext(ctx(t), fmt.Sprintf(st.query, tbl), st.args...)
					require.False(t, armed.Load(), "the INSERT's reply never went by")
					rows := s.adminInt(t, "SELECT count(*) FROM "+tbl)
					t.Logf("%s: %v, %d rows", f, err, rows)
					if f == plainFlavour {
						if st.args == nil {
							// The fault pooldriver must not have: if this
							// fails, pgx no longer retries, and the README's
							// side-by-side row should say so.
							assert.NoError(t, err, "plain pgx stdlib")
							assert.EqualValues(t, 2, rows, "plain pgx stdlib: the INSERT ran twice")
						}
						return
					}
					require.Error(t, err, "a statement whose reply was lost returned nil")
					assert.NotErrorIs(t, err, driver.ErrBadConn, "database/sql may run it again")
					assert.EqualValues(t, 1, rows, "the INSERT ran more than once, or not at all")
					_, err = db.ExecContext(ctx(t), "SELECT 1")
					require.NoError(t, err, "the pool does not serve after the cut")
				})
			}
		}
	})
}

// openOneConn opens flavour f's *sql.DB on a pool of one server
// connection, for dsn, a pooldriver DSN without pool parameters.
func openOneConn(t *testing.T, s server, f flavour, dsn string) *sql.DB {
	t.Helper()
	var db *sql.DB
	var err error
	switch f {
	case plainFlavour:
		db, err = sql.Open("pgx", dsn)
		require.NoError(t, err)
		db.SetMaxOpenConns(1)
	case poolFlavour:
		db, err = pooldriver.Open(withParams(dsn, "pool_max_conns=1"))
		require.NoError(t, err)
	case wrapFlavour:
		c := pooldriver.Wrap(plainConnector(t, s, dsn), pooldriver.WithMaxConns(1))
		require.NoError(t, c.Err())
		db = sql.OpenDB(c)
	default:
		t.Fatalf("unknown flavour %q", f)
	}
	return db
}

// TestPgWireUnicodeEscapedNames (issue 21, item 3): a session setting and
// an advisory lock taken through names spelt with Unicode escapes (U&"…",
// with UESCAPE too) do not reach the next user of a pool of one. The plain
// driver hands every session on as it is, so only pooldriver's flavours
// run it.
func TestPgWireUnicodeEscapedNames(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		forEachFlavour(t, s, pooledFlavours, dbOpts{maxConns: 1}, func(t *testing.T, s server, db *subject) {
			for _, q := range []string{
				`SELECT U&"set\005fconfig"('x.y', 'leak', false)`,
				`SELECT U&"set!005fconfig" UESCAPE '!' ('x.y', 'leak', false)`,
				`SELECT pg_catalog.U&"set\+00005Fconfig"('x.y', 'leak', false)`,
			} {
				_, err := db.ExecContext(ctx(t), q)
				require.NoError(t, err, q)
				var v string
				require.NoError(t, db.QueryRowContext(ctx(t), "SELECT coalesce(current_setting('x.y', true), '')").Scan(&v))
				assert.Empty(t, v, "after %s the next user sees the setting", q)
			}

			key := 777001 + rand.Int64N(1<<20)
			for _, q := range []string{
				`SELECT U&"pg\005fadvisory\005flock"(%d)`,
				`SELECT U&"pg\005Ftry\005Fadvisory\005Flock\005Fshared"(%d)`,
			} {
				q = fmt.Sprintf(q, key)
				_, err := db.ExecContext(ctx(t), q)
				require.NoError(t, err, q)
				// The next user's session does not hold it, and once the
				// hold is settled no session does.
				var mine int64
				require.NoError(t, db.QueryRowContext(ctx(t),
					"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND pid = pg_backend_pid()", key).Scan(&mine))
				assert.Zero(t, mine, "after %s the next user holds the lock", q)
				waitFor(t, "the advisory lock released", func() bool {
					return s.adminInt(t, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 0 AND objid = $1", key) == 0
				})
			}
		})
	})
}
