package integration

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// TestKeywordValueDSNQuotedSemicolon: a PostgreSQL keyword/value DSN whose
// quoted password holds a ';' (password='a;b') opens, both ways a user
// opens one, and runs as its role; nothing pooldriver prints quotes the
// password: not String(), not a Config's String or log value, not a
// configuration error, not a connect error. (The test server may trust
// local connections and not check the password: the DSN must still be
// read as PostgreSQL's, the password kept out of every text.)
func TestKeywordValueDSNQuotedSemicolon(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		const password = "a;b"
		base, err := pgx.ParseConfig(s.dsn)
		require.NoError(t, err)
		u, err := url.Parse(s.dsn)
		require.NoError(t, err)

		role, app := unique("pd_semi"), unique("pd_semi")
		s.adminExec(t, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", role, password))
		t.Cleanup(func() {
			if _, err := s.admin(t).ExecContext(context.Background(), "DROP ROLE "+role); err != nil {
				t.Errorf("dropping role %s: %v", role, err)
			}
		})
		dsn := func(dbname string, extra ...string) string {
			kv := []string{
				"host=" + base.Host, fmt.Sprintf("port=%d", base.Port), "user=" + role,
				"password='" + password + "'", "dbname=" + dbname, "application_name=" + app,
			}
			if m := u.Query().Get("sslmode"); m != "" {
				kv = append(kv, "sslmode="+m)
			}
			return strings.Join(append(kv, extra...), " ")
		}
		noPassword := func(what, text string) {
			t.Helper()
			require.NotContains(t, text, password, "%s quotes the password", what)
		}
		tn := &tenant{s: s, name: app}

		opens := map[string]func(string) (*sql.DB, error){
			`sql.Open("pooldriver", dsn)`: func(dsn string) (*sql.DB, error) { return sql.Open("pooldriver", dsn) },
			"sql.OpenDB(pooldriver.New(dsn))": func(dsn string) (*sql.DB, error) {
				c := pooldriver.New(dsn)
				if err := c.Err(); err != nil {
					return nil, err
				}
				noPassword("Connector.String", c.String())
				return sql.OpenDB(c), nil
			},
		}
		for name, open := range opens {
			t.Run(name, func(t *testing.T) {
				db, err := open(dsn(base.Database))
				require.NoError(t, err)
				t.Cleanup(func() {
					_ = db.Close()
					tn.waitConns(t, 0) // before the role is dropped
				})
				var user string
				require.NoError(t, db.QueryRowContext(ctx(t), "SELECT current_user").Scan(&user))
				require.Equal(t, role, user)
			})
		}

		cfg, err := pooldriver.ParseConfig(dsn(base.Database))
		require.NoError(t, err)
		noPassword("Config.String", cfg.String())
		noPassword("Config.LogValue", cfg.LogValue().String())

		c := pooldriver.New(dsn(base.Database, "pool_max_conns=none"))
		require.Error(t, c.Err(), "pool_max_conns=none")
		noPassword("a configuration error", c.Err().Error())
		noPassword("an invalid Connector's String", c.String())

		db := sql.OpenDB(pooldriver.New(dsn(unique("pd_nodb"))))
		t.Cleanup(func() { _ = db.Close() })
		err = db.PingContext(ctx(t))
		require.Error(t, err, "a database that does not exist")
		noPassword("a connect error", err.Error())
	})
}
