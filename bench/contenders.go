package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pooldriver/pooldriver"
	_ "github.com/pooldriver/pooldriver/dialects/mysql"    // mysql:// DSNs
	_ "github.com/pooldriver/pooldriver/dialects/postgres" // postgres:// DSNs
)

// The contenders' names. The same name is used on both servers where a
// contender exists on both.
const (
	SQLDefault     = "sql-default"     // database/sql + the real driver, database/sql at its defaults
	SQLTuned       = "sql-tuned"       // the same with SetMaxOpenConns(N), SetMaxIdleConns(N): the baseline
	PgxPool        = "pgxpool"         // pgxpool, native API, MaxConns N
	PgxPoolSQL     = "pgxpool-sql"     // database/sql (defaults) over pgxpool via stdlib.OpenDBFromPool
	Pooldriver     = "pooldriver"      // sql.OpenDB(pooldriver.New(dsn)), database/sql at its defaults
	PooldriverTask = "pooldriver-task" // the same, every operation (or request) in a pooldriver task
)

// Spec describes a contender before it is opened.
type Spec struct {
	Name string
	// Bounded is false for a contender that has no pool size: database/sql
	// at its defaults over a real driver opens as many server connections
	// as there are concurrent callers.
	Bounded bool
	open    func(s Server, name string, n int) (*Contender, error)
}

// Open opens the contender on s with pool size n. Nothing is dialled yet.
func (sp Spec) Open(s Server, n int) (*Contender, error) {
	c, err := sp.open(s, sp.Name, n)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", s.Name, sp.Name, err)
	}
	c.Name, c.Server, c.Bounded = sp.Name, s, sp.Bounded
	return c, nil
}

// Contenders returns the contenders that run against s, the baseline
// (SQLTuned) first.
func Contenders(s Server) []Spec {
	if s.Name == "postgres" {
		return []Spec{
			{SQLTuned, true, openPgSQL(true)},
			{SQLDefault, false, openPgSQL(false)},
			{PgxPool, true, openPgxPool(false)},
			{PgxPoolSQL, true, openPgxPool(true)},
			{Pooldriver, true, openPooldriver(false)},
			{PooldriverTask, true, openPooldriver(true)},
		}
	}
	return []Spec{
		{SQLTuned, true, openMySQLSQL(true)},
		{SQLDefault, false, openMySQLSQL(false)},
		{Pooldriver, true, openPooldriver(false)},
	}
}

// Contender is one way of reaching the server, opened with a pool size.
// Exactly one of DB and Pool is set.
type Contender struct {
	Name    string
	Server  Server
	Bounded bool
	DB      *sql.DB               // every database/sql contender
	Pool    *pgxpool.Pool         // pgxpool, native API; also under PgxPoolSQL's DB
	PD      *pooldriver.Connector // pooldriver's connector, for its Stats
	Task    bool                  // run each operation in its own pooldriver task

	conns *connCounter // counts the server connections dialled; nil for pooldriver
}

// Close closes the contender and every server connection it has.
func (c *Contender) Close() {
	if c.DB != nil {
		_ = c.DB.Close()
	}
	if c.Pool != nil {
		c.Pool.Close()
	}
}

// Opened returns how many server connections the contender has opened: the
// TCP connections its driver dialled (counted by a dial hook), or, for
// pooldriver, which dials inside its dialect, Stats().Created.
func (c *Contender) Opened() int64 {
	if c.PD != nil {
		return c.PD.Stats().Created
	}
	return c.conns.opened.Load()
}

// Live returns how many server connections the contender has open now.
func (c *Contender) Live() int64 {
	if c.PD != nil {
		return int64(c.PD.Stats().Total)
	}
	return c.conns.live.Load()
}

// Peak returns the most server connections open at once since ResetPeak,
// counted exactly by the dial hook; for pooldriver it returns Live (sample
// it).
func (c *Contender) Peak() int64 {
	if c.PD != nil {
		return c.Live()
	}
	return c.conns.peak.Load()
}

// ResetPeak starts a new Peak period.
func (c *Contender) ResetPeak() {
	if c.conns != nil {
		c.conns.peak.Store(c.conns.live.Load())
	}
}

// PointSelect reads one row by primary key, in a task of its own for a
// task contender.
func (c *Contender) PointSelect(ctx context.Context, id int) error {
	if c.Task {
		ctx, end := pooldriver.WithTask(ctx)
		defer end()
		return c.pointSelect(ctx, id)
	}
	return c.pointSelect(ctx, id)
}

func (c *Contender) pointSelect(ctx context.Context, id int) error {
	var name string
	var n int64
	if c.DB == nil {
		return c.Pool.QueryRow(ctx, c.Server.PointSelect, id).Scan(&name, &n)
	}
	return c.DB.QueryRowContext(ctx, c.Server.PointSelect, id).Scan(&name, &n)
}

// Request runs what the HTTP handler of a request does: three point
// selects, with whatever task ctx carries (the Middleware's, for a task
// contender).
func (c *Contender) Request(ctx context.Context, ids [3]int) error {
	for _, id := range ids {
		if err := c.pointSelect(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// ShortTx runs BEGIN; UPDATE; SELECT; COMMIT on one row.
func (c *Contender) ShortTx(ctx context.Context, id int) error {
	if c.Task {
		ctx, end := pooldriver.WithTask(ctx)
		defer end()
		return c.shortTx(ctx, id)
	}
	return c.shortTx(ctx, id)
}

func (c *Contender) shortTx(ctx context.Context, id int) error {
	var n int64
	if c.DB == nil {
		tx, err := c.Pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }() // after Commit: nothing to undo
		if _, err := tx.Exec(ctx, c.Server.Update, id); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, c.Server.SelectN, id).Scan(&n); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	tx, err := c.DB.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // after Commit: nothing to undo
	if _, err := tx.ExecContext(ctx, c.Server.Update, id); err != nil {
		return err
	}
	if err := tx.QueryRowContext(ctx, c.Server.SelectN, id).Scan(&n); err != nil {
		return err
	}
	return tx.Commit()
}

// Hold holds one physical server connection for d and gives it back. The
// connection is taken by beginning a transaction, the one way that holds a
// physical connection in every contender:
//
//   - database/sql over a real driver: BeginTx holds a driver connection,
//     which is a server connection (so does db.Conn, but not under
//     pooldriver);
//   - pgxpool: Begin is Acquire plus BEGIN; Commit sends COMMIT and
//     releases;
//   - pooldriver: a *sql.Conn holds only a logical connection, which owns
//     no server connection between statements; BeginTx pins a physical one
//     until Commit. A task contender does this inside a task.
//
// wait is the time from the call to the BEGIN's reply: the wait for a
// connection plus one round trip, the same round trip for every contender.
func (c *Contender) Hold(ctx context.Context, d time.Duration) (wait time.Duration, err error) {
	if c.Task {
		ctx, end := pooldriver.WithTask(ctx)
		defer end()
		return c.hold(ctx, d)
	}
	return c.hold(ctx, d)
}

func (c *Contender) hold(ctx context.Context, d time.Duration) (time.Duration, error) {
	start := time.Now()
	if c.DB == nil {
		tx, err := c.Pool.Begin(ctx)
		if err != nil {
			return 0, err
		}
		wait := time.Since(start)
		time.Sleep(d)
		return wait, tx.Commit(ctx)
	}
	tx, err := c.DB.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	wait := time.Since(start)
	time.Sleep(d)
	return wait, tx.Commit()
}

func openPgSQL(tuned bool) func(Server, string, int) (*Contender, error) {
	return func(s Server, name string, n int) (*Contender, error) {
		cfg, err := s.pgConfig(AppName(name))
		if err != nil {
			return nil, err
		}
		cc := &connCounter{}
		cfg.DialFunc = cc.dial
		db := stdlib.OpenDB(*cfg)
		if tuned {
			db.SetMaxOpenConns(n)
			db.SetMaxIdleConns(n)
		}
		return &Contender{DB: db, conns: cc}, nil
	}
}

func openPgxPool(underSQL bool) func(Server, string, int) (*Contender, error) {
	return func(s Server, name string, n int) (*Contender, error) {
		cfg, err := pgxpool.ParseConfig(s.DSN)
		if err != nil {
			return nil, fmt.Errorf("postgres DSN: %w", err)
		}
		cfg.MaxConns = int32(n)
		cfg.ConnConfig.RuntimeParams["application_name"] = AppName(name)
		cc := &connCounter{}
		cfg.ConnConfig.DialFunc = cc.dial
		p, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			return nil, err
		}
		c := &Contender{Pool: p, conns: cc}
		if underSQL {
			c.DB = stdlib.OpenDBFromPool(p) // database/sql at its defaults
		}
		return c, nil
	}
}

func openMySQLSQL(tuned bool) func(Server, string, int) (*Contender, error) {
	return func(s Server, name string, n int) (*Contender, error) {
		cfg, err := s.mysqlConfig()
		if err != nil {
			return nil, err
		}
		cc := &connCounter{}
		cfg.DialFunc = cc.dial
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, err
		}
		db := sql.OpenDB(conn)
		if tuned {
			db.SetMaxOpenConns(n)
			db.SetMaxIdleConns(n)
		}
		return &Contender{DB: db, conns: cc}, nil
	}
}

func openPooldriver(task bool) func(Server, string, int) (*Contender, error) {
	return func(s Server, name string, n int) (*Contender, error) {
		kv := []string{"pool_max_conns", strconv.Itoa(n)}
		if s.Name == "postgres" {
			kv = append(kv, "application_name", AppName(name))
		}
		pd := pooldriver.New(withParams(s.DSN, kv...))
		if err := pd.Err(); err != nil {
			return nil, err
		}
		// database/sql left at its defaults.
		return &Contender{DB: sql.OpenDB(pd), PD: pd, Task: task}, nil
	}
}

// connCounter counts the server connections a driver dials, through the
// driver's dial hook.
type connCounter struct {
	opened atomic.Int64 // TCP connections established
	live   atomic.Int64 // of those, not yet closed
	peak   atomic.Int64 // the most live at once since the last reset
}

func (cc *connCounter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{KeepAlive: 5 * time.Minute}
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	cc.opened.Add(1)
	live := cc.live.Add(1)
	for {
		p := cc.peak.Load()
		if live <= p || cc.peak.CompareAndSwap(p, live) {
			break
		}
	}
	return &countedConn{Conn: nc, cc: cc}, nil
}

// countedConn takes itself off its counter's live count when closed.
type countedConn struct {
	net.Conn
	cc   *connCounter
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.cc.live.Add(-1) })
	return c.Conn.Close()
}

// IsTooManyConns reports whether err is the server refusing a connection
// because its connection limit is reached.
func IsTooManyConns(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1040 {
		return true
	}
	if err == nil {
		return false
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "too many clients") || strings.Contains(msg, "too many connections") ||
		strings.Contains(msg, "remaining connection slots")
}
