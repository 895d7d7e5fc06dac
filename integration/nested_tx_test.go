package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"
	"github.com/uptrace/bun/dialect/pgdialect"
	"gorm.io/gorm"

	"github.com/pooldriver/pooldriver"
)

// The tests in this file prove issue 36: a *sql.Tx begun in a task whose
// connection has a raw transaction open (BEGIN run as a statement) nests in
// that transaction as a savepoint, so that an ORM's own unit of work (GORM's
// default transaction around every write, bun's RunInTx, sqlx's Beginx)
// belongs to the task's transaction: the task's ROLLBACK undoes it, and it
// never waits on the task's own locks. Each scenario runs through
// pooldriver and, side by side, through the plain driver, whose outcome is
// logged, not asserted: there the raw BEGIN itself goes to a pooled
// connection of its own, and the ORM's transaction to another.

// nestEnv is one database, pooled or plain, with a table of names.
type nestEnv struct {
	s      server
	pooled bool
	db     *sql.DB
	c      *pooldriver.Connector // nil for the plain driver
	table  string
}

func (e *nestEnv) label() string {
	if e.pooled {
		return "pooldriver"
	}
	return "plain"
}

// openNest opens s through pooldriver (pooled) or its plain driver, with a
// fresh table (name varchar primary key, qty int).
func openNest(t *testing.T, s server, pooled bool) *nestEnv {
	t.Helper()
	e := &nestEnv{s: s, pooled: pooled, table: unique("nest")}
	if pooled {
		e.c = pooldriver.New(s.dsn)
		require.NoError(t, e.c.Err())
		e.db = sql.OpenDB(e.c)
	} else {
		e.db = sql.OpenDB(plainConnector(t, s, s.dsn))
		e.db.SetMaxOpenConns(4)
	}
	t.Cleanup(func() {
		// Closed first: the plain driver leaves transactions open on its
		// pooled connections, whose locks the DROP would wait for.
		_ = e.db.Close()
		db := sql.OpenDB(plainConnector(t, s, s.dsn))
		defer func() { _ = db.Close() }()
		_, err := db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+e.table)
		assert.NoError(t, err)
	})
	_, err := e.db.ExecContext(ctx(t), "CREATE TABLE "+e.table+" (name varchar(64) PRIMARY KEY, qty int NOT NULL DEFAULT 0)")
	require.NoError(t, err)
	return e
}

// task starts a task under pooldriver; under the plain driver the context
// is the caller's (the plain driver has no tasks).
func (e *nestEnv) task(t *testing.T, mode ...pooldriver.Mode) (context.Context, func()) {
	c := timeout(t, hangTimeout)
	if !e.pooled {
		return c, func() {}
	}
	return pooldriver.WithTask(c, mode...)
}

// durable returns the names committed in the table, sorted, read on a
// connection of the test's own.
func (e *nestEnv) durable(t *testing.T) []string {
	t.Helper()
	db := sql.OpenDB(plainConnector(t, e.s, e.s.dsn))
	defer func() { _ = db.Close() }()
	rows, err := db.QueryContext(ctx(t), "SELECT name FROM "+e.table)
	require.NoError(t, err)
	defer func() { _ = rows.Close() }()
	names := []string{}
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		names = append(names, n)
	}
	require.NoError(t, rows.Err())
	sort.Strings(names)
	return names
}

// clear deletes every row, on a connection of the test's own (the plain
// driver may have left one with a transaction open).
func (e *nestEnv) clear(t *testing.T) {
	t.Helper()
	db := sql.OpenDB(plainConnector(t, e.s, e.s.dsn))
	defer func() { _ = db.Close() }()
	execOK(t, db, ctx(t), "DELETE FROM "+e.table)
}

// qty returns the committed qty of name.
func (e *nestEnv) qty(t *testing.T, name string) int {
	t.Helper()
	db := sql.OpenDB(plainConnector(t, e.s, e.s.dsn))
	defer func() { _ = db.Close() }()
	var n int
	require.NoError(t, db.QueryRowContext(ctx(t), "SELECT qty FROM "+e.table+" WHERE name = '"+name+"'").Scan(&n))
	return n
}

// check asserts want under pooldriver and logs the plain driver's outcome
// beside it.
func (e *nestEnv) check(t *testing.T, what string, want, got any) {
	t.Helper()
	t.Logf("%s %s: %v", e.label(), what, got)
	if e.pooled {
		assert.Equal(t, want, got, what)
	}
}

// forBoth runs f through pooldriver and through the plain driver.
func forBoth(t *testing.T, s server, f func(t *testing.T, e *nestEnv)) {
	for _, pooled := range []bool{true, false} {
		label := "plain"
		if pooled {
			label = "pooldriver"
		}
		t.Run(label, func(t *testing.T) { f(t, openNest(t, s, pooled)) })
	}
}

func execOK(t *testing.T, r interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, c context.Context, query string, args ...any) {
	t.Helper()
	_, err := r.ExecContext(c, query, args...)
	require.NoError(t, err, query)
}

// TestNestedTxDatabaseSQL: BEGIN; INSERT a; BeginTx; INSERT b;
// tx.Rollback(); INSERT c; COMMIT keeps a and c; with tx.Commit() and an
// outer ROLLBACK nothing is kept. In both modes.
func TestNestedTxDatabaseSQL(t *testing.T) {
	forEachServer(t, func(t *testing.T, s server) {
		for _, mode := range []pooldriver.Mode{pooldriver.TransactionMode, pooldriver.SessionMode} {
			t.Run(mode.String(), func(t *testing.T) {
				forBoth(t, s, func(t *testing.T, e *nestEnv) {
					ins := "INSERT INTO " + e.table + " (name) VALUES ('%s')"
					c, end := e.task(t, mode)
					execOK(t, e.db, c, "BEGIN")
					execOK(t, e.db, c, fmt.Sprintf(ins, "a"))
					tx, err := e.db.BeginTx(c, nil)
					require.NoError(t, err)
					execOK(t, tx, c, fmt.Sprintf(ins, "b"))
					require.NoError(t, tx.Rollback())
					execOK(t, e.db, c, fmt.Sprintf(ins, "c"))
					execOK(t, e.db, c, "COMMIT")
					end()
					e.check(t, "inner rolled back, outer committed: durable", []string{"a", "c"}, e.durable(t))

					c, end = e.task(t, mode)
					execOK(t, e.db, c, "BEGIN")
					execOK(t, e.db, c, fmt.Sprintf(ins, "d"))
					tx, err = e.db.BeginTx(c, nil)
					require.NoError(t, err)
					execOK(t, tx, c, fmt.Sprintf(ins, "e"))
					require.NoError(t, tx.Commit())
					execOK(t, e.db, c, fmt.Sprintf(ins, "f"))
					execOK(t, e.db, c, "ROLLBACK")
					end()
					e.check(t, "inner committed, outer rolled back: durable", []string{"a", "c"}, e.durable(t))
					if e.pooled {
						// A session-mode task's end resets in the background.
						waitFor(t, "the connection back", func() bool { return e.c.Stats().Active == 0 })
					}
				})
			})
		}
	})
}

// nestWidget is the GORM and bun model of the table.
type nestWidget struct {
	bun.BaseModel `bun:"table:nest_widget" gorm:"-"`
	Name          string `gorm:"primaryKey" bun:"name,pk"`
	Qty           int    `bun:"qty"`
}

// gormOn hands e.db to GORM at its default settings (a transaction around
// every write), the model's table being e.table.
func gormOn(t *testing.T, e *nestEnv) *gorm.DB {
	env := &ormEnv{s: e.s, db: e.db}
	return openGORM(t, env, "").Table(e.table)
}

// TestNestedTxGORM: GORM at its default settings inside a task's raw
// transaction. Its Create (wrapped in a *sql.Tx of GORM's) is undone by the
// task's ROLLBACK and kept by its COMMIT; its Update of a row the task
// locked returns at once instead of waiting on the task's own lock.
func TestNestedTxGORM(t *testing.T) {
	forEachServer(t, func(t *testing.T, s server) {
		forBoth(t, s, func(t *testing.T, e *nestEnv) {
			g := gormOn(t, e)

			c, end := e.task(t)
			tg := g.WithContext(c)
			require.NoError(t, tg.Exec("BEGIN").Error)
			require.NoError(t, tg.Create(&nestWidget{Name: "rolled-back"}).Error)
			require.NoError(t, tg.Exec("ROLLBACK").Error)
			end()
			e.check(t, "Create then ROLLBACK: durable", []string{}, e.durable(t))

			c, end = e.task(t)
			tg = g.WithContext(c)
			require.NoError(t, tg.Exec("BEGIN").Error)
			require.NoError(t, tg.Create(&nestWidget{Name: "r", Qty: 1}).Error)
			require.NoError(t, tg.Exec("COMMIT").Error)
			end()
			e.check(t, "Create then COMMIT: durable", []string{"r"}, e.durable(t))

			// The task locks r with a raw UPDATE; GORM's Update of r, in
			// its own *sql.Tx, must not wait for that lock. The plain
			// driver's waits until its context ends.
			c, end = e.task(t)
			tg = g.WithContext(c)
			require.NoError(t, tg.Exec("BEGIN").Error)
			require.NoError(t, tg.Exec("UPDATE "+e.table+" SET qty = 2 WHERE name = 'r'").Error)
			uctx, cancel := context.WithTimeout(c, 5*time.Second)
			start := time.Now()
			err := g.WithContext(uctx).Model(&nestWidget{}).Where("name = ?", "r").Update("qty", 3).Error
			cancel()
			t.Logf("%s: GORM Update of the task's locked row: %v after %s", e.label(), err, time.Since(start).Round(time.Millisecond))
			if e.pooled {
				require.NoError(t, err, "GORM's Update waited on the task's own lock")
			}
			require.NoError(t, tg.Exec("ROLLBACK").Error)
			end()
			e.check(t, "qty of r after the task's ROLLBACK", 1, e.qty(t, "r"))

			// GORM's own nested Transaction (savepoints of its own)
			// inside the nested *sql.Tx.
			c, end = e.task(t)
			tg = g.WithContext(c)
			require.NoError(t, tg.Exec("BEGIN").Error)
			err = tg.Transaction(func(tx *gorm.DB) error {
				if err := tx.Create(&nestWidget{Name: "outer"}).Error; err != nil {
					return err
				}
				_ = tx.Transaction(func(tx2 *gorm.DB) error {
					if err := tx2.Create(&nestWidget{Name: "inner"}).Error; err != nil {
						return err
					}
					return errORMRollback
				})
				return nil
			})
			require.NoError(t, err)
			require.NoError(t, tg.Exec("COMMIT").Error)
			end()
			e.check(t, "GORM nested Transaction, inner rolled back: durable", []string{"outer", "r"}, e.durable(t))
			if e.pooled {
				waitFor(t, "the connection back", func() bool { return e.c.Stats().Active == 0 })
			}
		})
	})
}

// TestNestedTxSqlxAndBun: sqlx's Beginx and bun's RunInTx inside a task's
// raw transaction belong to it.
func TestNestedTxSqlxAndBun(t *testing.T) {
	forEachServer(t, func(t *testing.T, s server) {
		forBoth(t, s, func(t *testing.T, e *nestEnv) {
			driverName := "pgx"
			var bdb *bun.DB
			if s.name == "mysql" {
				driverName = "mysql"
				bdb = bun.NewDB(e.db, mysqldialect.New())
			} else {
				bdb = bun.NewDB(e.db, pgdialect.New())
			}
			x := sqlx.NewDb(e.db, driverName)

			want := map[string][]string{"ROLLBACK": {}, "COMMIT": {"bun", "sqlx"}}
			for _, outer := range []string{"ROLLBACK", "COMMIT"} {
				c, end := e.task(t)
				execOK(t, x, c, "BEGIN")
				tx, err := x.BeginTxx(c, nil)
				require.NoError(t, err)
				execOK(t, tx, c, x.Rebind("INSERT INTO "+e.table+" (name) VALUES (?)"), "sqlx")
				require.NoError(t, tx.Commit())
				err = bdb.RunInTx(c, nil, func(c context.Context, btx bun.Tx) error {
					_, err := btx.NewInsert().Model(&nestWidget{Name: "bun"}).ModelTableExpr(e.table).Exec(c)
					return err
				})
				require.NoError(t, err)
				execOK(t, x, c, outer)
				end()
				e.check(t, "sqlx Beginx and bun RunInTx, outer "+outer+": durable", want[outer], e.durable(t))
				e.clear(t)
			}
		})
	})
}

// TestNestedTxOptions: options a savepoint cannot honour are an error
// naming both; those of the open transaction nest.
func TestNestedTxOptions(t *testing.T) {
	forEachServer(t, func(t *testing.T, s server) {
		e := openNest(t, s, true)
		c, end := pooldriver.WithTask(timeout(t, hangTimeout))
		defer end()
		execOK(t, e.db, c, "BEGIN")
		_, err := e.db.BeginTx(c, &sql.TxOptions{Isolation: sql.LevelSerializable})
		require.Error(t, err)
		t.Logf("Serializable inside the task's transaction: %v", err)
		assert.Contains(t, err.Error(), "Serializable")
		_, err = e.db.BeginTx(c, &sql.TxOptions{ReadOnly: true})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "read-only")
		if s.name == "postgres" {
			assert.Contains(t, err.Error(), "the open transaction is Read Committed, read-write")
			tx, err := e.db.BeginTx(c, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
			require.NoError(t, err, "the open transaction's own level nests")
			require.NoError(t, tx.Commit())
		}
		// The task's transaction is intact.
		execOK(t, e.db, c, "INSERT INTO "+e.table+" (name) VALUES ('after')")
		execOK(t, e.db, c, "COMMIT")
		end()
		assert.Equal(t, []string{"after"}, e.durable(t))
	})
}

// TestNestedTxWaits: a second *sql.Tx begun while one is nested waits for
// it, then nests in turn; one whose context ends first fails saying why.
// Statements of the task outside the nested *sql.Tx fail at once.
func TestNestedTxWaits(t *testing.T) {
	forEachServer(t, func(t *testing.T, s server) {
		e := openNest(t, s, true)
		c, end := pooldriver.WithTask(timeout(t, hangTimeout))
		defer end()
		execOK(t, e.db, c, "BEGIN")
		first, err := e.db.BeginTx(c, nil)
		require.NoError(t, err)
		execOK(t, first, c, "INSERT INTO "+e.table+" (name) VALUES ('first')")

		_, err = e.db.ExecContext(c, "INSERT INTO "+e.table+" (name) VALUES ('stray')")
		assert.ErrorIs(t, err, pooldriver.ErrSessionBusy, "a statement outside the nested *sql.Tx")

		short, cancel := context.WithTimeout(c, time.Second)
		_, err = e.db.BeginTx(short, nil)
		cancel()
		require.Error(t, err)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "nested")

		var wg sync.WaitGroup
		var second *sql.Tx
		var secondErr error
		began := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			second, secondErr = e.db.BeginTx(c, nil)
			close(began)
		}()
		select {
		case <-began:
			t.Fatal("the second *sql.Tx did not wait for the first")
		case <-time.After(time.Second): // it waits: a window, not a bound on success
		}
		require.NoError(t, first.Commit())
		wg.Wait()
		require.NoError(t, secondErr)
		execOK(t, second, c, "INSERT INTO "+e.table+" (name) VALUES ('second')")
		require.NoError(t, second.Rollback())
		execOK(t, e.db, c, "COMMIT")
		end()
		assert.Equal(t, []string{"first"}, e.durable(t))
		waitFor(t, "the connection back", func() bool { return e.c.Stats().Active == 0 })
	})
}

// TestNestedTxTaskEnd: a task that ends with a nested *sql.Tx open rolls
// back all of it; the *sql.Tx's Commit then fails with ErrTaskEnded.
func TestNestedTxTaskEnd(t *testing.T) {
	forEachServer(t, func(t *testing.T, s server) {
		e := openNest(t, s, true)
		c, end := pooldriver.WithTask(timeout(t, hangTimeout))
		execOK(t, e.db, c, "BEGIN")
		execOK(t, e.db, c, "INSERT INTO "+e.table+" (name) VALUES ('outer')")
		tx, err := e.db.BeginTx(c, nil)
		require.NoError(t, err)
		execOK(t, tx, c, "INSERT INTO "+e.table+" (name) VALUES ('inner')")
		end()
		err = tx.Commit()
		require.Error(t, err)
		// Whichever saw the end first answers: database/sql (the task's
		// context is cancelled, or its own rollback already ran) or
		// pooldriver (see README, "After a task ended").
		assert.True(t, errors.Is(err, pooldriver.ErrTaskEnded) || errors.Is(err, sql.ErrTxDone) || errors.Is(err, context.Canceled),
			"Commit after the task's end: %v", err)
		assert.Equal(t, []string{}, e.durable(t))
		waitFor(t, "the connection back in the pool", func() bool { return e.c.Stats().Active == 0 })
	})
}

// TestNestedTxOnlyInsideARawTransaction: in a task with no transaction
// open, two *sql.Tx are their own transactions on their own connections,
// as with the plain driver: both commit independently.
func TestNestedTxOnlyInsideARawTransaction(t *testing.T) {
	forEachServer(t, func(t *testing.T, s server) {
		e := openNest(t, s, true)
		c, end := pooldriver.WithTask(timeout(t, hangTimeout))
		defer end()
		a, err := e.db.BeginTx(c, nil)
		require.NoError(t, err)
		b, err := e.db.BeginTx(c, nil)
		require.NoError(t, err)
		execOK(t, a, c, "INSERT INTO "+e.table+" (name) VALUES ('a')")
		execOK(t, b, c, "INSERT INTO "+e.table+" (name) VALUES ('b')")
		assert.Equal(t, 2, e.c.Stats().Active, "each *sql.Tx on a connection of its own")
		require.NoError(t, b.Rollback())
		require.NoError(t, a.Commit())
		end()
		assert.Equal(t, []string{"a"}, e.durable(t))
	})
}

// TestNestedTxWrapSQLite: through Wrap's generic dialect too (SQLite's
// SAVEPOINT, RELEASE and ROLLBACK TO inside a BEGIN).
func TestNestedTxWrapSQLite(t *testing.T) {
	conn, _ := sqliteConnector(t)
	c := pooldriver.Wrap(conn, pooldriver.WithMaxConns(2))
	require.NoError(t, c.Err())
	db := sql.OpenDB(c)
	t.Cleanup(func() { _ = db.Close() })
	execOK(t, db, ctx(t), "CREATE TABLE n (v int)")
	for _, outer := range []string{"COMMIT", "ROLLBACK"} {
		task, end := pooldriver.WithTask(ctx(t))
		execOK(t, db, task, "BEGIN")
		execOK(t, db, task, "INSERT INTO n VALUES (1)")
		tx, err := db.BeginTx(task, nil)
		require.NoError(t, err)
		execOK(t, tx, task, "INSERT INTO n VALUES (2)")
		if outer == "COMMIT" {
			require.NoError(t, tx.Rollback())
		} else {
			require.NoError(t, tx.Commit())
		}
		execOK(t, db, task, "INSERT INTO n VALUES (3)")
		execOK(t, db, task, outer)
		end()
	}
	var got string
	require.NoError(t, db.QueryRowContext(ctx(t), "SELECT group_concat(v) FROM n").Scan(&got))
	assert.Equal(t, "1,3", got)
	waitFor(t, "the connection to go back to the pool", func() bool { return c.Stats().Active == 0 })
}
