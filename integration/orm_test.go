package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gormmysql "gorm.io/driver/mysql"
	gormpostgres "gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
	"gorm.io/gorm/schema"

	"github.com/pooldriver/pooldriver"
)

// The tests in this file swap pooldriver in under GORM and sqlx, as a
// service would: the ORM is handed the *sql.DB and keeps working, inside
// and outside tasks.

const ormMaxConns = 4

// errORMRollback is returned from transaction callbacks to make them roll back.
var errORMRollback = errors.New("orm test: roll back")

// ormEnv is one *sql.DB over a pooldriver Connector, for one server.
type ormEnv struct {
	s       server
	c       *pooldriver.Connector
	db      *sql.DB
	appName string // postgres: the application_name of every physical conn
}

// openORM opens sql.OpenDB(pooldriver.New(dsn)) with at most ormMaxConns
// physical connections. The DB is closed when the test ends, after the
// cleanups registered later (dropping tables) have run.
func openORM(t *testing.T, s server) *ormEnv {
	t.Helper()
	e := &ormEnv{s: s}
	params := []string{fmt.Sprintf("pool_max_conns=%d", ormMaxConns)}
	switch s.name {
	case "postgres":
		e.appName = unique("pooldriver_orm")
		params = append(params, "application_name="+e.appName)
	case "mysql":
		params = append(params, "parseTime=true") // GORM's time.Time fields
	}
	dsn := s.dsn
	sep := "?"
	if containsQuery(dsn) {
		sep = "&"
	}
	dsn += sep + strings.Join(params, "&")
	e.c = pooldriver.New(dsn)
	require.NoError(t, e.c.Err())
	e.db = sql.OpenDB(e.c)
	t.Cleanup(func() { _ = e.db.Close() })
	require.NoError(t, e.db.PingContext(ctx(t)))
	return e
}

// active waits until n physical connections are in use: a session reset
// runs in the background, and its connection is in use until it is done.
func (e *ormEnv) active(t *testing.T, n int, what string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s: %d", what, n), func() bool { return e.c.Stats().Active == n })
}

// dropTable drops table when the test ends, before the DB is closed.
func (e *ormEnv) dropTable(t *testing.T, table string) {
	t.Cleanup(func() {
		_, err := e.db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table)
		assert.NoError(t, err, "drop %s", table)
	})
}

// holdAll binds every physical connection the pool can have to its own
// session-mode task, one after the other (each task keeps the connection
// its first statement got), and calls f with each task's context. Every
// connection used before is among them.
func (e *ormEnv) holdAll(t *testing.T, f func(ctx context.Context)) {
	t.Helper()
	var ends []func()
	defer func() {
		for _, end := range ends {
			end()
		}
	}()
	var ctxs []context.Context
	for range ormMaxConns {
		tctx, end := pooldriver.WithTask(ctx(t), pooldriver.SessionMode)
		ends = append(ends, end)
		var one int
		require.NoError(t, e.db.QueryRowContext(tctx, "SELECT 1").Scan(&one))
		ctxs = append(ctxs, tctx)
	}
	require.Equal(t, ormMaxConns, e.c.Stats().Active, "each task holds its own connection")
	for _, c := range ctxs {
		f(c)
	}
}

// finish checks what must hold once the ORM is done: no physical
// connection in use, no transaction open on any of them (neither as
// pooldriver sees it nor as the server does), and exactly
// wantAutoRollbacks transactions rolled back by pooldriver rather than by
// the ORM.
func (e *ormEnv) finish(t *testing.T, wantAutoRollbacks int64) {
	t.Helper()
	e.active(t, 0, "physical connections still in use")
	st := e.c.Stats()
	assert.Equal(t, wantAutoRollbacks, st.AutoRollbacks, "transactions pooldriver had to roll back")
	assert.LessOrEqual(t, st.Total, ormMaxConns)

	switch e.s.name {
	case "postgres":
		// The server's view of every pooled connection, from a connection
		// of its own. Waited for: pooldriver's own work off the callers'
		// paths (the catalog read again after the test's DDL, on an idle
		// connection) may run there a moment; a transaction left open
		// stays.
		pc := open(t, e.s.template(t, ""))
		seen := func() string {
			return queryString(t, pc, "SELECT coalesce(string_agg(state || ': ' || left(query, 60), '; '), '') FROM pg_stat_activity WHERE application_name = $1 AND state <> 'idle'", e.appName)
		}
		var last string
		waitForSaying(t, "pooled connections idle on the server (a transaction left open?)",
			func() bool { last = seen(); return last == "" }, func() string { return last })
	case "mysql":
		// Each pooled connection asks the server itself.
		e.holdAll(t, func(c context.Context) {
			var inTx bool
			require.NoError(t, e.db.QueryRowContext(c, "SELECT @@in_transaction <> 0").Scan(&inTx))
			assert.False(t, inTx, "a pooled connection has a transaction open")
		})
	}
	e.active(t, 0, "connections in use")
}

// ---------------------------------------------------------------- GORM

// ormWidget is the GORM model; its table gets a per-test prefix.
type ormWidget struct {
	ID        uint   `gorm:"primaryKey"`
	Name      string `gorm:"size:64;not null;uniqueIndex"`
	Qty       int    `gorm:"not null;default:0"`
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ormWidgetV2 adds a column to ormWidget's table (a second migration).
type ormWidgetV2 struct {
	ID        uint   `gorm:"primaryKey"`
	Name      string `gorm:"size:64;not null;uniqueIndex"`
	Qty       int    `gorm:"not null;default:0"`
	Note      string `gorm:"size:100"`
	CreatedAt time.Time
	UpdatedAt time.Time
}

// gormLogWriter sends GORM's warnings to the test log.
type gormLogWriter struct{ t *testing.T }

func (w gormLogWriter) Printf(format string, args ...any) { w.t.Logf(format, args...) }

// openGORM hands e.db to GORM with the server's dialector; every table
// gets prefix.
func openGORM(t *testing.T, e *ormEnv, prefix string) *gorm.DB {
	t.Helper()
	var d gorm.Dialector
	switch e.s.name {
	case "postgres":
		d = gormpostgres.New(gormpostgres.Config{Conn: e.db})
	case "mysql":
		// Initialize runs SELECT VERSION() through the pool.
		d = gormmysql.New(gormmysql.Config{Conn: e.db, SkipInitializeWithVersion: false})
	default:
		t.Fatalf("no GORM dialector for %s", e.s.name)
	}
	gdb, err := gorm.Open(d, &gorm.Config{
		NamingStrategy: schema.NamingStrategy{TablePrefix: prefix},
		Logger: logger.New(gormLogWriter{t}, logger.Config{
			LogLevel:                  logger.Warn,
			IgnoreRecordNotFoundError: true,
			SlowThreshold:             5 * time.Second,
		}),
	})
	require.NoError(t, err)
	return gdb
}

// countName returns how many widgets are called name.
func countName(t *testing.T, g *gorm.DB, name string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, g.Model(&ormWidget{}).Where("name = ?", name).Count(&n).Error)
	return n
}

// gormCRUD runs migrations-free CRUD and every kind of GORM transaction
// through g (which carries the context to use); names start with label.
func gormCRUD(t *testing.T, g *gorm.DB, label string) {
	t.Helper()
	name := func(s string) string { return label + "-" + s }

	// Create / First / Updates / Delete.
	w := ormWidget{Name: name("a"), Qty: 1}
	require.NoError(t, g.Create(&w).Error)
	require.NotZero(t, w.ID)
	var got ormWidget
	require.NoError(t, g.First(&got, w.ID).Error)
	assert.Equal(t, w.Name, got.Name)
	assert.Equal(t, 1, got.Qty)
	assert.False(t, got.CreatedAt.IsZero())

	res := g.Model(&got).Updates(map[string]any{"qty": 5})
	require.NoError(t, res.Error)
	assert.EqualValues(t, 1, res.RowsAffected)
	res = g.Model(&ormWidget{}).Where("id = ?", w.ID).Updates(ormWidget{Qty: 6})
	require.NoError(t, res.Error)
	assert.EqualValues(t, 1, res.RowsAffected)
	got = ormWidget{}
	require.NoError(t, g.Where("name = ?", w.Name).First(&got).Error)
	assert.Equal(t, 6, got.Qty)

	var list []ormWidget
	require.NoError(t, g.Where("name LIKE ?", label+"-%").Order("id").Find(&list).Error)
	require.Len(t, list, 1)

	res = g.Delete(&ormWidget{}, w.ID)
	require.NoError(t, res.Error)
	assert.EqualValues(t, 1, res.RowsAffected)
	err := g.First(&ormWidget{}, w.ID).Error
	assert.ErrorIs(t, err, gorm.ErrRecordNotFound)

	// Transaction: committed.
	require.NoError(t, g.Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&ormWidget{Name: name("commit"), Qty: 2}).Error; err != nil {
			return err
		}
		return tx.Model(&ormWidget{}).Where("name = ?", name("commit")).Update("qty", 3).Error
	}))
	got = ormWidget{}
	require.NoError(t, g.Where("name = ?", name("commit")).First(&got).Error)
	assert.Equal(t, 3, got.Qty)

	// Transaction: rolled back by returning an error.
	err = g.Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&ormWidget{Name: name("rollback")}).Error; err != nil {
			return err
		}
		assert.EqualValues(t, 1, countName(t, tx, name("rollback")), "the transaction sees its own row")
		return errORMRollback
	})
	require.ErrorIs(t, err, errORMRollback)
	assert.Zero(t, countName(t, g, name("rollback")), "rolled back row persisted")

	// Nested transactions (savepoints): an inner one rolled back by an
	// error, one by a failed statement (a duplicate name, which in
	// PostgreSQL aborts the whole transaction unless rolled back to the
	// savepoint), one committed; the outer one commits.
	require.NoError(t, g.Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&ormWidget{Name: name("outer")}).Error; err != nil {
			return err
		}
		err := tx.Transaction(func(tx2 *gorm.DB) error {
			if err := tx2.Create(&ormWidget{Name: name("inner-err")}).Error; err != nil {
				return err
			}
			return errORMRollback
		})
		if !errors.Is(err, errORMRollback) {
			return fmt.Errorf("inner transaction: got %v, want errORMRollback", err)
		}
		err = tx.Transaction(func(tx2 *gorm.DB) error {
			quiet := tx2.Session(&gorm.Session{Logger: tx2.Logger.LogMode(logger.Silent)})
			return quiet.Create(&ormWidget{Name: name("outer")}).Error // duplicate
		})
		if err == nil {
			return errors.New("inner transaction: a duplicate name was accepted")
		}
		return tx.Transaction(func(tx2 *gorm.DB) error {
			return tx2.Create(&ormWidget{Name: name("inner-ok")}).Error
		})
	}))
	assert.EqualValues(t, 1, countName(t, g, name("outer")))
	assert.Zero(t, countName(t, g, name("inner-err")), "row of a rolled back savepoint persisted")
	assert.EqualValues(t, 1, countName(t, g, name("inner-ok")))

	// Begin / SavePoint / RollbackTo / Commit by hand.
	tx := g.Begin()
	require.NoError(t, tx.Error)
	require.NoError(t, tx.Create(&ormWidget{Name: name("manual")}).Error)
	require.NoError(t, tx.SavePoint("sp1").Error)
	require.NoError(t, tx.Create(&ormWidget{Name: name("manual-undone")}).Error)
	require.NoError(t, tx.RollbackTo("sp1").Error)
	require.NoError(t, tx.Commit().Error)
	assert.EqualValues(t, 1, countName(t, g, name("manual")))
	assert.Zero(t, countName(t, g, name("manual-undone")))

	// Begin / Rollback by hand.
	tx = g.Begin()
	require.NoError(t, tx.Error)
	require.NoError(t, tx.Create(&ormWidget{Name: name("manual-rb")}).Error)
	require.NoError(t, tx.Rollback().Error)
	assert.Zero(t, countName(t, g, name("manual-rb")))

	// Raw SQL through GORM.
	var n int64
	require.NoError(t, g.Raw("SELECT count(*) FROM "+tableOf(t, g)+" WHERE name LIKE ?", label+"-%").Scan(&n).Error)
	assert.EqualValues(t, 4, n) // commit, outer, inner-ok, manual
}

// tableOf returns the table of ormWidget under g's naming strategy.
func tableOf(t *testing.T, g *gorm.DB) string {
	t.Helper()
	st := &gorm.Statement{DB: g}
	require.NoError(t, st.Parse(&ormWidget{}))
	return st.Table
}

func TestORMGORM(t *testing.T) {
	longTest(t)
	forEachServer(t, func(t *testing.T, s server) {
		e := openORM(t, s)
		prefix := unique("orm") + "_"
		g := openGORM(t, e, prefix)
		table := tableOf(t, g)
		e.dropTable(t, table)

		// Migrations, outside any task: create, run again (a no-op that
		// reads the table's columns back), add a column.
		require.NoError(t, g.AutoMigrate(&ormWidget{}))
		require.True(t, g.Migrator().HasTable(&ormWidget{}))
		require.NoError(t, g.AutoMigrate(&ormWidget{}))
		require.NoError(t, g.Table(table).AutoMigrate(&ormWidgetV2{}))
		assert.True(t, g.Migrator().HasColumn(&ormWidget{}, "note"), "migration did not add the column")
		cols, err := g.Migrator().ColumnTypes(&ormWidget{})
		require.NoError(t, err)
		assert.GreaterOrEqual(t, len(cols), 6)
		require.True(t, g.Migrator().HasIndex(&ormWidget{}, "Name"))
		e.active(t, 0, "connections in use")

		t.Run("no task", func(t *testing.T) {
			gormCRUD(t, g.WithContext(ctx(t)), "plain")
			e.active(t, 0, "connections in use")
		})

		t.Run("prepared statements", func(t *testing.T) {
			// GORM's PrepareStmt caches *sql.Stmt across calls and
			// transactions; each runs on whatever connection it gets.
			p := g.Session(&gorm.Session{PrepareStmt: true})
			gormCRUD(t, p.WithContext(ctx(t)), "prep")
			tctx, end := pooldriver.WithTask(ctx(t))
			gormCRUD(t, p.WithContext(tctx), "prep-task")
			end()
			e.active(t, 0, "connections in use")
		})

		t.Run("migration in a task", func(t *testing.T) {
			tctx, end := pooldriver.WithTask(ctx(t))
			defer end()
			tg := g.WithContext(tctx)
			require.NoError(t, tg.AutoMigrate(&ormWidget{}))
			type ormGadget struct {
				ID   uint
				Name string `gorm:"size:20"`
			}
			e.dropTable(t, prefix+"orm_gadgets")
			require.NoError(t, tg.AutoMigrate(&ormGadget{}))
			require.NoError(t, tg.Create(&ormGadget{Name: "x"}).Error)
			require.NoError(t, tg.Migrator().DropTable(&ormGadget{}))
			assert.False(t, tg.Migrator().HasTable(&ormGadget{}))
			end()
			e.active(t, 0, "connections in use")
		})

		t.Run("transaction mode task", func(t *testing.T) {
			tctx, end := pooldriver.WithTask(ctx(t), pooldriver.TransactionMode)
			defer end()
			tg := g.WithContext(tctx)
			gormCRUD(t, tg, "txtask")
			// Nothing pins the connection between statements.
			e.active(t, 0, "transaction-mode task keeps a connection while nothing pins it")

			// A GORM transaction is its own, as with the plain driver:
			// statements run with the task's context on the plain
			// *gorm.DB do not run inside it and do not see its
			// uncommitted rows; the transaction's own statements do.
			name := "txtask-shared"
			err := tg.Transaction(func(tx *gorm.DB) error {
				require.NoError(t, tx.Create(&ormWidget{Name: name}).Error)
				assert.EqualValues(t, 1, countName(t, tx, name), "the transaction does not see its own row")
				assert.Zero(t, countName(t, tg, name), "a statement outside the transaction ran inside it")
				assert.Zero(t, countName(t, g.WithContext(ctx(t)), name), "uncommitted row seen outside the task")
				e.active(t, 1, "connections in use")
				return errORMRollback
			})
			require.ErrorIs(t, err, errORMRollback)
			assert.Zero(t, countName(t, tg, name))
			e.active(t, 0, "connections in use")

			// A raw BEGIN through GORM keeps the connection bound across
			// GORM calls until the raw ROLLBACK / COMMIT: at GORM's
			// default settings, where each write is GORM's own *sql.Tx
			// (nested in the raw transaction), and with
			// SkipDefaultTransaction, where it is a plain statement.
			for _, raw := range []*gorm.DB{tg, tg.Session(&gorm.Session{SkipDefaultTransaction: true})} {
				rb, commit := "txtask-raw-rb", "txtask-raw-commit"
				if raw.SkipDefaultTransaction {
					rb, commit = rb+"-skip", commit+"-skip"
				}
				require.NoError(t, raw.Exec("BEGIN").Error)
				require.NoError(t, raw.Create(&ormWidget{Name: rb}).Error)
				require.NoError(t, raw.Model(&ormWidget{}).Where("name = ?", rb).Update("qty", 9).Error)
				assert.EqualValues(t, 1, countName(t, raw, rb))
				assert.Zero(t, countName(t, g.WithContext(ctx(t)), rb), "uncommitted row seen outside the task")
				e.active(t, 1, "a raw transaction does not pin the task's connection")
				require.NoError(t, raw.Exec("ROLLBACK").Error)
				assert.Zero(t, countName(t, g.WithContext(ctx(t)), rb), "raw ROLLBACK did not undo GORM's insert")
				e.active(t, 0, "connections in use")

				require.NoError(t, raw.Exec("BEGIN").Error)
				require.NoError(t, raw.Create(&ormWidget{Name: commit}).Error)
				require.NoError(t, raw.Exec("COMMIT").Error)
				assert.EqualValues(t, 1, countName(t, g.WithContext(ctx(t)), commit))
			}

			end()
			e.active(t, 0, "connections in use")
		})

		t.Run("rows iterated while writing", func(t *testing.T) {
			// A common pattern: iterate over Rows() and write per row, all
			// with the task's context. The open result set pins the task's
			// connection; the writes must not deadlock behind it.
			tctx, end := pooldriver.WithTask(ctx(t))
			defer end()
			tg := g.WithContext(tctx)
			for i := range 5 {
				require.NoError(t, tg.Create(&ormWidget{Name: fmt.Sprintf("rows-%d", i), Qty: i}).Error)
			}
			rows, err := tg.Model(&ormWidget{}).Where("name LIKE ?", "rows-%").Order("id").Rows()
			require.NoError(t, err)
			n := 0
			for rows.Next() {
				var w ormWidget
				require.NoError(t, tg.ScanRows(rows, &w))
				require.NoError(t, tg.Model(&ormWidget{}).Where("id = ?", w.ID).Update("qty", w.Qty+100).Error)
				n++
			}
			require.NoError(t, rows.Err())
			require.NoError(t, rows.Close())
			assert.Equal(t, 5, n)
			var sum int
			require.NoError(t, tg.Model(&ormWidget{}).Where("name LIKE ?", "rows-%").Select("sum(qty)").Scan(&sum).Error)
			assert.Equal(t, 510, sum)

			// FindInBatches, writing inside each batch's callback.
			var batches int
			res := tg.Where("name LIKE ?", "rows-%").FindInBatches(&[]ormWidget{}, 2, func(b *gorm.DB, _ int) error {
				batches++
				return b.Model(&ormWidget{}).Where("name LIKE ?", "rows-%").Update("qty", gorm.Expr("qty + 1")).Error
			})
			require.NoError(t, res.Error)
			assert.Equal(t, 3, batches)
			require.NoError(t, tg.Where("name LIKE ?", "rows-%").Delete(&ormWidget{}).Error)
			end()
			e.active(t, 0, "connections in use")
		})

		t.Run("concurrent tasks", func(t *testing.T) {
			// More tasks than connections, each with its own GORM
			// transactions: they wait for each other, never see each
			// other's uncommitted rows, and leave nothing behind.
			const workers = 3 * ormMaxConns
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for i := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					mode := pooldriver.TransactionMode
					if i%2 == 1 {
						mode = pooldriver.SessionMode
					}
					tctx, end := pooldriver.WithTask(ctx(t), mode)
					defer end()
					tg := g.WithContext(tctx)
					name := fmt.Sprintf("conc-%d", i)
					errs <- tg.Transaction(func(tx *gorm.DB) error {
						if err := tx.Create(&ormWidget{Name: name}).Error; err != nil {
							return err
						}
						var n int64
						if err := tx.Model(&ormWidget{}).Where("name LIKE ?", "conc-%").Count(&n).Error; err != nil {
							return err
						}
						if n != 1 {
							return fmt.Errorf("task %d sees %d conc rows inside its transaction, want its own only", i, n)
						}
						return errORMRollback
					})
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				assert.ErrorIs(t, err, errORMRollback)
			}
			assert.Zero(t, countName(t, g.WithContext(ctx(t)), "conc-0"))
			e.active(t, 0, "connections in use")
		})

		t.Run("session mode task", func(t *testing.T) {
			resets := e.c.Stats().SessionResets
			tctx, end := pooldriver.WithTask(ctx(t), pooldriver.SessionMode)
			defer end()
			tg := g.WithContext(tctx)

			// Session state seen by GORM raw queries across calls.
			require.NoError(t, tg.Exec(s.setVar).Error)
			var v string
			require.NoError(t, tg.Raw(s.getVar).Scan(&v).Error)
			assert.Equal(t, "1", v, "session variable lost between GORM calls")

			tmp := unique("orm_tmp")
			require.NoError(t, tg.Exec("CREATE TEMPORARY TABLE "+tmp+" (v INT NOT NULL)").Error)
			require.NoError(t, tg.Exec("INSERT INTO "+tmp+" (v) VALUES (1), (2)").Error)
			require.NoError(t, tg.Transaction(func(tx *gorm.DB) error {
				return tx.Exec("INSERT INTO " + tmp + " (v) VALUES (3)").Error
			}))
			var sum int
			require.NoError(t, tg.Raw("SELECT sum(v) FROM "+tmp).Scan(&sum).Error)
			assert.Equal(t, 6, sum, "temporary table not seen across GORM calls")
			e.active(t, 1, "session task gave its connection back")

			gormCRUD(t, tg, "sesstask")

			// Still the same session after all that.
			require.NoError(t, tg.Raw("SELECT count(*) FROM "+tmp).Scan(&sum).Error)
			assert.Equal(t, 3, sum)
			v = ""
			require.NoError(t, tg.Raw(s.getVar).Scan(&v).Error)
			assert.Equal(t, "1", v)

			end()
			e.active(t, 0, "connections in use")
			assert.Equal(t, resets+1, e.c.Stats().SessionResets)
			// The session was reset: no connection has the temporary table
			// or the variable any more.
			e.holdAll(t, func(c context.Context) {
				var v string
				require.NoError(t, g.WithContext(c).Raw(s.getVar).Scan(&v).Error)
				assert.Empty(t, v, "session variable survived the task")
				var n int
				quiet := g.Session(&gorm.Session{Logger: g.Logger.LogMode(logger.Silent)})
				err := quiet.WithContext(c).Raw("SELECT count(*) FROM " + tmp).Scan(&n).Error
				assert.Error(t, err, "temporary table survived the task")
			})
		})

		// Every row the subtests committed is there, and nothing else.
		var names []string
		require.NoError(t, g.WithContext(ctx(t)).Model(&ormWidget{}).Order("name").Pluck("name", &names).Error)
		want := []string{}
		for _, l := range []string{"plain", "prep", "prep-task", "txtask", "sesstask"} {
			want = append(want, l+"-commit", l+"-inner-ok", l+"-manual", l+"-outer")
		}
		want = append(want, "txtask-raw-commit", "txtask-raw-commit-skip")
		assert.ElementsMatch(t, want, names)

		e.finish(t, 0) // the ORM ended every transaction itself

		t.Run("task ends with a GORM transaction open", func(t *testing.T) {
			before := e.c.Stats().AutoRollbacks
			tctx, end := pooldriver.WithTask(ctx(t))
			tx := g.WithContext(tctx).Begin()
			require.NoError(t, tx.Error)
			require.NoError(t, tx.Create(&ormWidget{Name: "abandoned"}).Error)
			end()
			assert.Error(t, tx.Commit().Error, "commit after the task ended")
			assert.Zero(t, countName(t, g.WithContext(ctx(t)), "abandoned"), "transaction of an ended task persisted")
			// Commit on the ended context returns at once and leaves the
			// rollback to database/sql's goroutine watching the context
			// (as with the plain driver): the connection comes back when
			// that goroutine has run.
			waitFor(t, "the transaction's connection back in the pool", func() bool { return e.c.Stats().Active == 0 })
			// Whether this one is counted is racy: see
			// TestORMGORMAbandonedTransactionsCounted.
			assert.LessOrEqual(t, e.c.Stats().AutoRollbacks, before+1)
		})
		e.finish(t, e.c.Stats().AutoRollbacks)
	})
}

// TestORMGORMAbandonedTransactionsCounted ends tasks while a GORM
// transaction (a database/sql Tx begun with the task's context) is open.
// Each is rolled back, and each must count in Stats().AutoRollbacks
// ("transactions pooldriver rolled back: at task end"), which is how a
// service finds code that abandons transactions.
//
// It used to fail now and then (a few in a hundred tasks went uncounted):
// the task's end cancelled the task's context before it rolled back, which
// woke database/sql's Tx.awaitDone, and when that goroutine's Rollback
// claimed the transaction first nothing counted it. Now the task claims its
// transactions before cancelling, and a rollback by database/sql because
// the task's context ended counts as the task's (tx.end).
func TestORMGORMAbandonedTransactionsCounted(t *testing.T) {
	longTest(t)
	forEachServer(t, func(t *testing.T, s server) {
		e := openORM(t, s)
		g := openGORM(t, e, unique("orm")+"_")
		e.dropTable(t, tableOf(t, g))
		require.NoError(t, g.AutoMigrate(&ormWidget{}))

		const tasks = 300
		before := e.c.Stats().AutoRollbacks
		for i := range tasks {
			tctx, end := pooldriver.WithTask(ctx(t))
			tx := g.WithContext(tctx).Begin()
			require.NoError(t, tx.Error)
			require.NoError(t, tx.Create(&ormWidget{Name: fmt.Sprintf("abandoned-%d", i)}).Error)
			end()
			require.Error(t, tx.Commit().Error, "commit after the task ended")
		}
		var n int64
		require.NoError(t, g.WithContext(ctx(t)).Model(&ormWidget{}).Count(&n).Error)
		assert.Zero(t, n, "transactions of ended tasks persisted")
		// The last transactions' rollbacks may still be under way in
		// database/sql's goroutines (see "task ends with a GORM transaction
		// open" above): on a loaded machine they run later. Wait for them
		// before counting.
		settle(t, func() bool {
			st := e.c.Stats()
			return st.Active == 0 && st.AutoRollbacks >= before+tasks
		})
		e.active(t, 0, "connections in use")
		assert.Equal(t, before+tasks, e.c.Stats().AutoRollbacks,
			"abandoned transactions rolled back at task end but not counted")
	})
}

// ---------------------------------------------------------------- sqlx

type sqlxWidget struct {
	ID   int    `db:"id"`
	Name string `db:"name"`
	Qty  int    `db:"qty"`
}

// sqlxCRUD runs CRUD and Beginx transactions through x with c; ids are
// base+1..base+9. inTask says whether c carries a task.
func sqlxCRUD(t *testing.T, x *sqlx.DB, c context.Context, inTask bool, table string, base int) {
	t.Helper()
	q := func(s string) string { return x.Rebind(strings.ReplaceAll(s, "{T}", table)) }
	count := func(id int) int {
		var n int
		require.NoError(t, x.GetContext(c, &n, q("SELECT count(*) FROM {T} WHERE id = ?"), id))
		return n
	}

	_, err := x.NamedExecContext(c, "INSERT INTO "+table+" (id, name, qty) VALUES (:id, :name, :qty)",
		sqlxWidget{ID: base + 1, Name: "one", Qty: 1})
	require.NoError(t, err)
	_, err = x.NamedExecContext(c, "INSERT INTO "+table+" (id, name, qty) VALUES (:id, :name, :qty)",
		[]sqlxWidget{{ID: base + 2, Name: "two", Qty: 2}, {ID: base + 3, Name: "three", Qty: 3}})
	require.NoError(t, err)

	var w sqlxWidget
	require.NoError(t, x.GetContext(c, &w, q("SELECT id, name, qty FROM {T} WHERE id = ?"), base+2))
	assert.Equal(t, sqlxWidget{ID: base + 2, Name: "two", Qty: 2}, w)
	err = x.GetContext(c, &w, q("SELECT id, name, qty FROM {T} WHERE id = ?"), base+99)
	assert.ErrorIs(t, err, sql.ErrNoRows)

	var ws []sqlxWidget
	require.NoError(t, x.SelectContext(c, &ws, q("SELECT id, name, qty FROM {T} WHERE id BETWEEN ? AND ? ORDER BY id"), base+1, base+9))
	assert.Equal(t, []sqlxWidget{{base + 1, "one", 1}, {base + 2, "two", 2}, {base + 3, "three", 3}}, ws)

	rows, err := x.NamedQueryContext(c, "SELECT id, name, qty FROM "+table+" WHERE id = :id", map[string]any{"id": base + 3})
	require.NoError(t, err)
	n := 0
	for rows.Next() {
		require.NoError(t, rows.StructScan(&w))
		n++
	}
	require.NoError(t, rows.Err())
	require.NoError(t, rows.Close())
	assert.Equal(t, 1, n)
	assert.Equal(t, "three", w.Name)

	res, err := x.ExecContext(c, q("UPDATE {T} SET qty = qty + 10 WHERE id = ?"), base+1)
	require.NoError(t, err)
	aff, err := res.RowsAffected()
	require.NoError(t, err)
	assert.EqualValues(t, 1, aff)
	res, err = x.ExecContext(c, q("DELETE FROM {T} WHERE id = ?"), base+3)
	require.NoError(t, err)
	aff, err = res.RowsAffected()
	require.NoError(t, err)
	assert.EqualValues(t, 1, aff)

	// A prepared statement.
	st, err := x.PreparexContext(c, q("SELECT qty FROM {T} WHERE id = ?"))
	require.NoError(t, err)
	var qty int
	require.NoError(t, st.GetContext(c, &qty, base+1))
	assert.Equal(t, 11, qty)
	require.NoError(t, st.Close())

	// Beginx: committed.
	tx, err := x.BeginTxx(c, nil)
	require.NoError(t, err)
	_, err = tx.NamedExecContext(c, "INSERT INTO "+table+" (id, name, qty) VALUES (:id, :name, :qty)",
		sqlxWidget{ID: base + 4, Name: "four", Qty: 4})
	require.NoError(t, err)
	require.NoError(t, tx.GetContext(c, &w, tx.Rebind("SELECT id, name, qty FROM "+table+" WHERE id = ?"), base+4))
	assert.Equal(t, "four", w.Name)
	require.NoError(t, tx.Commit())
	assert.Equal(t, 1, count(base+4))

	// Beginx: rolled back.
	tx, err = x.BeginTxx(c, nil)
	require.NoError(t, err)
	tx.MustExecContext(c, tx.Rebind("INSERT INTO "+table+" (id, name, qty) VALUES (?, ?, ?)"), base+5, "five", 5)
	tx.MustExecContext(c, tx.Rebind("UPDATE "+table+" SET qty = 0 WHERE id = ?"), base+1)
	var in []sqlxWidget
	require.NoError(t, tx.SelectContext(c, &in, tx.Rebind("SELECT id, name, qty FROM "+table+" WHERE id BETWEEN ? AND ? ORDER BY id"), base+1, base+9))
	assert.Len(t, in, 4)
	require.NoError(t, tx.Rollback())
	assert.Zero(t, count(base+5), "rolled back row persisted")
	require.NoError(t, x.GetContext(c, &qty, q("SELECT qty FROM {T} WHERE id = ?"), base+1))
	assert.Equal(t, 11, qty, "rolled back update persisted")

	// MustBegin (no context, so never in a task): commit.
	if !inTask {
		tx := x.MustBegin()
		tx.MustExec(tx.Rebind("INSERT INTO "+table+" (id, name, qty) VALUES (?, ?, ?)"), base+6, "six", 6)
		require.NoError(t, tx.Commit())
		assert.Equal(t, 1, count(base+6))
	}
}

func TestORMSqlx(t *testing.T) {
	longTest(t)
	forEachServer(t, func(t *testing.T, s server) {
		e := openORM(t, s)
		driverName := map[string]string{"postgres": "pgx", "mysql": "mysql"}[s.name]
		x := sqlx.NewDb(e.db, driverName)
		table := unique("orm_sqlx")
		e.dropTable(t, table)
		x.MustExec("CREATE TABLE " + table + " (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL, qty INT NOT NULL)")

		ids := func(c context.Context, from, to int) []int {
			var out []int
			require.NoError(t, x.SelectContext(c, &out, x.Rebind("SELECT id FROM "+table+" WHERE id BETWEEN ? AND ? ORDER BY id"), from, to))
			return out
		}

		t.Run("no task", func(t *testing.T) {
			c := ctx(t)
			sqlxCRUD(t, x, c, false, table, 0)
			assert.Equal(t, []int{1, 2, 4, 6}, ids(c, 0, 9))
			e.active(t, 0, "connections in use")
		})

		t.Run("transaction mode task", func(t *testing.T) {
			tctx, end := pooldriver.WithTask(ctx(t))
			defer end()
			sqlxCRUD(t, x, tctx, true, table, 10)
			e.active(t, 0, "transaction-mode task keeps a connection while nothing pins it")

			// A raw BEGIN, then sqlx calls with the task's context, then a
			// raw ROLLBACK: nothing persists.
			_, err := e.db.ExecContext(tctx, "BEGIN")
			require.NoError(t, err)
			_, err = x.NamedExecContext(tctx, "INSERT INTO "+table+" (id, name, qty) VALUES (:id, :name, :qty)",
				[]sqlxWidget{{ID: 17, Name: "seventeen"}, {ID: 18, Name: "eighteen"}})
			require.NoError(t, err)
			x.MustExecContext(tctx, x.Rebind("UPDATE "+table+" SET name = ? WHERE id = ?"), "changed", 11)
			var w sqlxWidget
			require.NoError(t, x.GetContext(tctx, &w, x.Rebind("SELECT id, name, qty FROM "+table+" WHERE id = ?"), 11))
			assert.Equal(t, "changed", w.Name)
			assert.Equal(t, []int{11, 12, 14, 17, 18}, ids(tctx, 10, 19), "the raw transaction does not see its own rows")
			assert.Equal(t, []int{11, 12, 14}, ids(ctx(t), 10, 19), "uncommitted rows seen outside the task")
			e.active(t, 1, "connections in use")
			_, err = e.db.ExecContext(tctx, "ROLLBACK")
			require.NoError(t, err)
			e.active(t, 0, "connections in use")
			assert.Equal(t, []int{11, 12, 14}, ids(ctx(t), 10, 19), "rows of a rolled back raw transaction persisted")
			require.NoError(t, x.GetContext(ctx(t), &w, x.Rebind("SELECT id, name, qty FROM "+table+" WHERE id = ?"), 11))
			assert.Equal(t, "one", w.Name)

			// The same, committed.
			_, err = e.db.ExecContext(tctx, "BEGIN")
			require.NoError(t, err)
			_, err = x.NamedExecContext(tctx, "INSERT INTO "+table+" (id, name, qty) VALUES (:id, :name, :qty)", sqlxWidget{ID: 19, Name: "nineteen"})
			require.NoError(t, err)
			_, err = e.db.ExecContext(tctx, "COMMIT")
			require.NoError(t, err)
			assert.Equal(t, []int{11, 12, 14, 19}, ids(ctx(t), 10, 19))

			end()
			e.active(t, 0, "connections in use")
		})

		t.Run("session mode task", func(t *testing.T) {
			tctx, end := pooldriver.WithTask(ctx(t), pooldriver.SessionMode)
			defer end()
			tmp := unique("orm_sqlx_tmp")
			x.MustExecContext(tctx, "CREATE TEMPORARY TABLE "+tmp+" (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL, qty INT NOT NULL)")
			_, err := x.NamedExecContext(tctx, "INSERT INTO "+tmp+" (id, name, qty) VALUES (:id, :name, :qty)", sqlxWidget{ID: 1, Name: "t"})
			require.NoError(t, err)
			x.MustExecContext(tctx, s.setVar)
			var v string
			require.NoError(t, x.GetContext(tctx, &v, s.getVar))
			assert.Equal(t, "1", v)

			sqlxCRUD(t, x, tctx, true, table, 20)
			// The temporary table is seen inside the task's Beginx too.
			tx, err := x.BeginTxx(tctx, nil)
			require.NoError(t, err)
			var ws []sqlxWidget
			require.NoError(t, tx.SelectContext(tctx, &ws, "SELECT id, name, qty FROM "+tmp))
			assert.Equal(t, []sqlxWidget{{1, "t", 0}}, ws)
			require.NoError(t, tx.Commit())
			e.active(t, 1, "connections in use")
			end()
			assert.Equal(t, []int{21, 22, 24}, ids(ctx(t), 20, 29))
			e.active(t, 0, "connections in use")
		})

		t.Run("task ends inside a raw transaction", func(t *testing.T) {
			before := e.c.Stats().AutoRollbacks
			tctx, end := pooldriver.WithTask(ctx(t))
			_, err := e.db.ExecContext(tctx, "BEGIN")
			require.NoError(t, err)
			x.MustExecContext(tctx, x.Rebind("INSERT INTO "+table+" (id, name, qty) VALUES (?, ?, ?)"), 31, "abandoned", 0)
			end()
			assert.Equal(t, before+1, e.c.Stats().AutoRollbacks)
			assert.Empty(t, ids(ctx(t), 30, 39), "raw transaction of an ended task persisted")
		})

		e.finish(t, 1) // the abandoned raw transaction only
	})
}
