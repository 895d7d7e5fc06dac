package integration

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// redactSecret is the password the redaction tests write into DSNs. No
// text pooldriver produces may show it, in any letter case, as written or
// percent-encoded.
const redactSecret = "Sekr1tPd9q"

// secretForm is one way of writing redactSecret into a DSN. dsn takes the
// address (host:port) and the database; rejected forms fail at parse time
// with an error naming key, because the driver would not read the
// password from there.
type secretForm struct {
	name     string
	dsn      func(addr, db, user string) string // user: MySQL only
	password string                             // the whole password written, when more than redactSecret
	rejected string                             // the key the parse error names, or ""
	noWrap   bool                               // the plain driver itself shows the secret: not through Wrap
}

var pgSecretForms = []secretForm{
	{name: "url user info", dsn: func(a, db, _ string) string {
		return "postgres://postgres:" + redactSecret + "@" + a + "/" + db + "?sslmode=disable"
	}},
	{name: "url user info percent-encoded", dsn: func(a, db, _ string) string {
		return "postgres://postgres:" + encodeAll(redactSecret) + "@" + a + "/" + db + "?sslmode=disable"
	}},
	{name: "url password", dsn: func(a, db, _ string) string {
		return "postgres://postgres@" + a + "/" + db + "?sslmode=disable&password=" + redactSecret
	}},
	{name: "url password percent-encoded", dsn: func(a, db, _ string) string {
		return "postgres://postgres@" + a + "/" + db + "?password=" + encodeAll(redactSecret) + "&sslmode=disable"
	}},
	{name: "url key percent-encoded", dsn: func(a, db, _ string) string {
		return "postgres://postgres@" + a + "/" + db + "?sslmode=disable&pass%77ord=" + redactSecret
	}},
	{name: "url PASSWORD", rejected: "PASSWORD", dsn: func(a, db, _ string) string {
		return "postgres://postgres@" + a + "/" + db + "?sslmode=disable&PASSWORD=" + redactSecret
	}},
	{name: "url Password", rejected: "Password", dsn: func(a, db, _ string) string {
		return "postgres://postgres@" + a + "/" + db + "?Password=" + redactSecret + "&sslmode=disable"
	}},
	{name: "keyword/value password", dsn: func(a, db, _ string) string {
		return pgKeywords(a, db) + " password=" + redactSecret
	}},
	{name: "keyword/value password quoted", dsn: func(a, db, _ string) string {
		return pgKeywords(a, db) + " password='" + redactSecret + "'"
	}},
	{name: "keyword/value PASSWORD", rejected: "PASSWORD", dsn: func(a, db, _ string) string {
		return pgKeywords(a, db) + " PASSWORD=" + redactSecret
	}},
	{name: "keyword/value Password quoted", rejected: "Password", dsn: func(a, db, _ string) string {
		return pgKeywords(a, db) + " Password='" + redactSecret + "'"
	}},
}

var mysqlSecretForms = []secretForm{
	{name: "user info", dsn: func(a, db, u string) string {
		return "mysql://" + u + ":" + redactSecret + "@tcp(" + a + ")/" + db
	}},
	// The driver reads the password up to the last '@' before the
	// address: "/@x" is part of it.
	{name: "user info with / and @", password: redactSecret + "/@x", dsn: func(a, db, u string) string {
		return "mysql://" + u + ":" + redactSecret + "/@x@tcp(" + a + ")/" + db + "?timeout=5s"
	}},
	// go-sql-driver reads no password from a parameter: it runs
	// SET password = <value>, whose syntax error quotes the value.
	{name: "password parameter", rejected: "password", noWrap: true, dsn: func(a, db, _ string) string {
		return "mysql://root@tcp(" + a + ")/" + db + "?password=" + redactSecret
	}},
	{name: "PASSWORD parameter", rejected: "PASSWORD", noWrap: true, dsn: func(a, db, _ string) string {
		return "mysql://root@tcp(" + a + ")/" + db + "?timeout=5s&PASSWORD=" + redactSecret
	}},
	{name: "Password parameter", rejected: "Password", noWrap: true, dsn: func(a, db, _ string) string {
		return "mysql://root@tcp(" + a + ")/" + db + "?Password=" + redactSecret
	}},
}

func pgKeywords(addr, db string) string {
	host, port, _ := strings.Cut(addr, ":")
	return fmt.Sprintf("host=%s port=%s user=postgres dbname=%s sslmode=disable", host, port, db)
}

func encodeAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, "%%%02X", s[i])
	}
	return b.String()
}

// lockedBuffer collects the log lines written from the pool's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// assertNoSecret fails if text shows the secret in any letter case, or
// any of its encodings.
func assertNoSecret(t *testing.T, what, text string) {
	t.Helper()
	lower := strings.ToLower(text)
	for _, s := range []string{redactSecret, encodeAll(redactSecret), url.QueryEscape(redactSecret)} {
		if strings.Contains(lower, strings.ToLower(s)) {
			t.Errorf("%s shows the password: %s", what, text)
			return
		}
	}
}

// TestRedactedEverywhere (issue 21, item 9): whatever the key's case and
// the DSN's form, the password shows in no connect error (a server that
// refuses the login or the database, an unreachable port), nor in
// String(), the pool name, Stats or any log line, through New and Wrap.
// A form the driver would not read as the password is refused at parse
// time, naming the key and never the value.
func TestRedactedEverywhere(t *testing.T) {
	forEachServer(t, func(t *testing.T, s server) {
		forms := pgSecretForms
		if s.name == "mysql" {
			forms = mysqlSecretForms
		}
		addr := serverAddr(t, s)
		// PostgreSQL here trusts every login: it refuses the database.
		// MariaDB refuses root, whose password is not the secret, and
		// lets in a user whose password it is.
		cases := []struct {
			name, addr, db, user string
			ok                   bool // the connection succeeds
		}{
			{name: "refused", addr: addr, db: "pd_no_such_db", user: "root"},
			{name: "unreachable", addr: "127.0.0.1:1", db: serverDatabase(t, s), user: "root"},
			{name: "connected", addr: addr, db: serverDatabase(t, s), ok: true},
		}
		for i, f := range forms {
			if s.name == "mysql" && f.rejected == "" {
				cases[2].user = fmt.Sprintf("pd_redact%d", i)
				s.mysqlUser(t, cases[2].user, cmp.Or(f.password, redactSecret))
			}
			for _, tc := range cases {
				dsn := f.dsn(tc.addr, tc.db, tc.user)
				t.Run(f.name+"/"+tc.name+"/New", func(t *testing.T) {
					t.Parallel()
					checkRedacted(t, f, tc.ok, func(opts ...pooldriver.Option) *pooldriver.Connector {
						return pooldriver.New(dsn, opts...)
					})
				})
				if f.noWrap {
					continue
				}
				t.Run(f.name+"/"+tc.name+"/Wrap", func(t *testing.T) {
					t.Parallel()
					// pgx reads a miscased key as a setting, which the
					// server refuses.
					ok := tc.ok && f.rejected == ""
					f := f
					f.rejected = ""
					checkRedacted(t, f, ok, func(opts ...pooldriver.Option) *pooldriver.Connector {
						return pooldriver.Wrap(plainConnector(t, s, dsn), opts...)
					})
				})
			}
		}
	})
}

// checkRedacted opens a Connector with a debug logger, pings twice (the
// second failure logs at warn), and checks every text it produced.
func checkRedacted(t *testing.T, f secretForm, ok bool, open func(...pooldriver.Option) *pooldriver.Connector) {
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := open(pooldriver.WithLogger(logger), pooldriver.WithMaxConns(1), pooldriver.WithConnectTimeout(10*time.Second))
	defer c.Close()
	texts := map[string]string{
		"String()": c.String(),
		"PoolName": c.PoolName(),
		"Stats":    fmt.Sprintf("%+v", c.Stats()),
	}
	if f.rejected != "" {
		require.Error(t, c.Err(), "the driver would not read the password from %s", f.rejected)
		require.Contains(t, c.Err().Error(), `"`+f.rejected+`"`)
		texts["Err"] = c.Err().Error()
	} else {
		require.NoError(t, c.Err())
	}
	db := sql.OpenDB(c)
	for i := range 2 {
		c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := db.PingContext(c)
		cancel()
		switch {
		case ok && f.rejected == "":
			require.NoError(t, err)
		case err == nil:
			t.Fatal("Ping succeeded, want the connect error")
		default:
			texts[fmt.Sprintf("error %d", i)] = err.Error()
			texts[fmt.Sprintf("error %d %%+v", i)] = fmt.Sprintf("%+v", err)
		}
	}
	texts["Stats after"] = fmt.Sprintf("%+v", c.Stats())
	require.NoError(t, db.Close())
	texts["logs"] = logs.String()
	if ok && f.rejected == "" && !strings.Contains(texts["logs"], "connection opened") {
		t.Errorf("no connection opened logged: %s", texts["logs"])
	}
	for what, text := range texts {
		assertNoSecret(t, what, text)
	}
}
