package integration

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// TestPoolNameDefault: a pool without pool_name is named
// host:port/database after the real server's DSN, with no password, and
// its log lines carry that name.
func TestPoolNameDefault(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		tn := newTenant(t, s)
		h, logger := newLogLines()
		db, c := tn.open(t, "", pooldriver.WithLogger(logger))
		require.NoError(t, db.PingContext(ctx(t)))
		var want string
		if s.name == "postgres" {
			cfg, err := pgx.ParseConfig(s.dsn)
			require.NoError(t, err)
			want = net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))) + "/" + cfg.Database
		} else {
			cfg, err := mysql.ParseDSN(strings.TrimPrefix(s.dsn, "mysql://"))
			require.NoError(t, err)
			want = cfg.Addr + "/" + cfg.DBName
		}
		assert.Equal(t, want, c.PoolName())
		assert.NotContains(t, c.PoolName(), "pw-")
		lines := h.with("pool opened")
		require.NotEmpty(t, lines)
		assert.Contains(t, lines[0], "pool="+c.PoolName())
	})
}
