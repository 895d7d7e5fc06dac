package integration

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/pool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBreakerAtConnectionLimit (issue 37): the server lets each subject's
// identity have 8 connections, fewer than the pool's 20, and 32 goroutines
// call in a closed loop. In the middle of each round the server also
// refuses the identity's logins for a while (a lock, as an administrator
// or a rotation does), which opens the opt-in breaker with every
// connection in use. pooldriver, with its default breaker and with
// pool.NewThresholdStrategy(3, 2*time.Second), serves at least 0.5× the
// successful statements of database/sql (SetMaxOpenConns(20)) in the same
// test and fails no more calls: an open circuit spaces dials, its callers
// wait for the connections in use (before, it refused 0.5 to 1.4 million
// calls at once where database/sql failed 1,300 to 16,000). The three run
// side by side, at once, so that all meet the same load on the machine:
// run one after the other, each met whatever the parallel tests were
// doing in its own seconds, and under CI's load the ratio swung from
// 0.4 to 1.3. Each call sleeps 30 ms on the server, and the two servers
// run one after the other, so that the eight connections, not the
// machine's two cores, bound what each subject serves (266 calls a second
// at most): with 2 ms calls the three subjects' 96 workers saturated the
// cores, and the ratio measured each driver's CPU per call (0.77 in a
// container run); at 10 ms with both servers side by side the six
// subjects still served what two cores could under -race (about 1,200
// calls a second between them), and the ratio read 0.58–0.88 on an idle
// machine, 0.61 and 0.65 in CI. Bound by the connections, database/sql
// serves nearly all it can (2,100 of 2,133 here) and pooldriver 0.81–0.91×
// of it on PostgreSQL (the breaker 0.71–0.96×), 0.90–0.91× on MariaDB: an
// open finding (docs/faults.md), which minGood leaves room for until it is
// understood, while a breaker that refused calls, the bug this test is
// for, cut goodput to a fraction and failed more calls (asserted apart).
func TestBreakerAtConnectionLimit(t *testing.T) {
	longTest(t)
	checkNoGoroutineLeak(t)
	const (
		limit   = 8
		poolMax = 20
		workers = 32
		rounds  = 4
		round   = 2 * time.Second
		minGood = 0.5
	)
	forEachServer(t, func(t *testing.T, s server) {
		// One server at a time: see the call's length above.
		type subject struct {
			name string
			db   *sql.DB
			c    *pooldriver.Connector
			r    *loadResult
			tn   *tenant
		}
		var subs []*subject
		{
			tn := limitedTenant(t, s, limit)
			db := sql.OpenDB(plainConnector(t, s, tn.base))
			db.SetMaxOpenConns(poolMax)
			db.SetMaxIdleConns(poolMax)
			t.Cleanup(func() { closeAndDrain(t, db, tn.backends, tn.kill) })
			subs = append(subs, &subject{name: "database/sql", db: db, r: &loadResult{}, tn: tn})
		}
		strategy, err := pool.NewThresholdStrategy(3, 2*time.Second)
		require.NoError(t, err)
		for _, f := range []struct {
			name string
			opts []pooldriver.Option
		}{{"pooldriver", nil}, {"pooldriver+breaker(3,2s)", []pooldriver.Option{pooldriver.WithCircuitBreaker(strategy)}}} {
			tn := limitedTenant(t, s, limit)
			c := pooldriver.New(withParams(tn.base, fmt.Sprintf("pool_max_conns=%d", poolMax)), f.opts...)
			require.NoError(t, c.Err())
			db := sql.OpenDB(c)
			db.SetMaxIdleConns(poolMax) // as pooldriver.Open does
			t.Cleanup(func() { closeAndDrain(t, db, tn.backends, tn.kill) })
			subs = append(subs, &subject{name: f.name, db: db, c: c, r: &loadResult{}, tn: tn})
		}
		admin := s.admin(t)
		for range rounds {
			var wg sync.WaitGroup
			for _, sub := range subs {
				wg.Go(func() {
					// In the middle of each round the server refuses new
					// logins of the identity, as an administrator's lock
					// or a rotation does, while its sessions go on: dials
					// fail for a cause other than the limit, and the
					// opt-in breaker opens with every connection in use.
					lockDone := make(chan struct{})
					go func() {
						defer close(lockDone)
						time.Sleep(round / 4)
						assert.NoError(t, lockLogin(admin, s, sub.tn, true))
						time.Sleep(round / 2)
						assert.NoError(t, lockLogin(admin, s, sub.tn, false))
					}()
					runLoad(sub.r, round, workers, fixedTO(faultCallTO), sleepOp(s, sub.db, 30))
					<-lockDone
				})
			}
			wg.Wait()
		}
		plain := subs[0].r.ok.Load()
		var line []string
		for _, sub := range subs {
			extra := ""
			if sub.c != nil {
				st := sub.c.Stats()
				extra = fmt.Sprintf(", %d created, %d breaker changes, %d refused by the open circuit, %d failed fast", st.Created, st.BreakerChanges, st.CircuitRejects, st.FailFastRejects)
			}
			t.Logf("%s at a limit of %d: %v%s", sub.name, limit, sub.r, extra)
			sub.r.logKinds(t, sub.name)
			line = append(line, fmt.Sprintf("%s %d", sub.name, sub.r.ok.Load()))
		}
		t.Logf("successes side by side: %s", strings.Join(line, ", "))
		for _, sub := range subs[1:] {
			sub.r.checkOverrun(t, sub.name)
			ok := sub.r.ok.Load()
			assert.GreaterOrEqual(t, float64(ok), float64(plain)*minGood,
				"goodput at the limit: %s %d, database/sql %d (%.2f×, want at least %.1f×)", sub.name, ok, plain, float64(ok)/float64(max(plain, 1)), minGood)
			// A caller refused while the pool's connections were in use
			// comes back at once in this closed loop, which hides the
			// refusal from the goodput: count the failed calls too.
			atMostPlain(t, sub.r.errs.Load(), subs[0].r.errs.Load(), sub.name+": failed calls at the limit")
		}
	})
}

// lockLogin makes the server refuse (or accept again) new logins of tn's
// identity, leaving its sessions alone: a PostgreSQL role NOLOGIN, a
// MariaDB account locked. It runs on admin, fetched by the test's
// goroutine.
func lockLogin(admin *sql.DB, s server, tn *tenant, lock bool) error {
	q := fmt.Sprintf("ALTER ROLE %s %s", tn.name, map[bool]string{true: "NOLOGIN", false: "LOGIN"}[lock])
	if s.name == "mysql" {
		q = fmt.Sprintf("ALTER USER '%s'@'%%' ACCOUNT %s", tn.name, map[bool]string{true: "LOCK", false: "UNLOCK"}[lock])
	}
	_, err := admin.ExecContext(context.Background(), q)
	return err
}
