package odbc

import (
	"context"
	"database/sql/driver"
	"fmt"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/dialects/internal/sqllex"
)

// conn is one physical ODBC connection. It is not safe for concurrent use;
// pooldriver serializes all calls.
type conn struct {
	d *drvConn

	// What the conn believes about the server session; see the package
	// doc. known is false when the next TxStatus must ask the server.
	known      bool
	inTx       bool
	failed     bool // PostgreSQL: the open transaction has failed
	autocommit bool // MariaDB/MySQL: @@autocommit
	inTxVar    int8 // MariaDB/MySQL: 1: @@in_transaction exists; -1: it does not (MySQL); 0: not yet known

	settings [][2]string // PostgreSQL: session settings made at connect time, replayed after DISCARD ALL

	trust bool // the user vouches for their functions (see TrustFunctions)
}

var (
	_ dialects.Conn            = (*conn)(nil)
	_ dialects.SessionTracker  = (*conn)(nil)
	_ dialects.FunctionTruster = (*conn)(nil)
)

// errBroken is returned by every method once the connection is lost.
var errBroken = fmt.Errorf("pooldriver: odbc: the connection is lost: %w", driver.ErrBadConn)

// Driver returns the connection statements run on: the odbc driver's
// connection, wrapped (see drvConn).
func (c *conn) Driver() driver.Conn { return c.d }

// Raw returns the *odbc.Conn of github.com/alexbrainman/odbc.
func (c *conn) Raw() any { return c.d.oc }

// TxStatus reports the transaction state: from the transaction BeginTx
// began, else from the conn's belief, which lastQuery may change and which
// is checked with the server when the statement's effect is unsure (see
// the package doc).
func (c *conn) TxStatus(ctx context.Context, lastQuery string) (dialects.TxStatus, error) {
	if c.d.bad {
		return dialects.TxIdle, errBroken
	}
	if c.d.tx != nil {
		return dialects.TxActive, nil
	}
	if lastQuery != "" && !(c.d.beginFailed && lastQuery == "BEGIN") {
		c.note(lastQuery)
	}
	c.d.beginFailed = false
	if !c.known {
		if err := c.ask(ctx, lastQuery); err != nil {
			return dialects.TxIdle, err
		}
	}
	switch {
	case c.failed:
		return dialects.TxFailed, nil
	case c.inTx:
		return dialects.TxActive, nil
	}
	return dialects.TxIdle, nil
}

// ChangesSession reports a statement that may have changed the session,
// by the rules of the server the driver serves (see the package doc):
// PostgreSQL's, MySQL's, or, for any other server, both together plus a few
// of other databases'. A call the rules cannot prove harmless (a function
// that is not a built-in known to leave the session alone, CALL, SQL run
// from a string) counts, unless the user trusts their functions: ODBC
// reports nothing of what a function did to the session.
func (c *conn) ChangesSession(query string) bool {
	return sqllex.Verdict(sqllex.Of(query, c.d.server.flavor()).Session(c.trust))
}

// TrustFunctions says whether the user vouches for their functions and
// procedures (see dialects.FunctionTruster). Not trusted by default.
func (c *conn) TrustFunctions(trust bool) { c.trust = trust }

// note updates the belief after query ran (successfully or not), or marks
// it unknown.
func (c *conn) note(query string) {
	stmts, ok := statements(query, c.d.server)
	switch c.d.server {
	case mysql:
		if !ok || !c.autocommit {
			c.known = false
			return
		}
		for _, st := range stmts {
			if effectOf(st, mysql) != noEffect {
				c.known = false
				return
			}
		}
	case postgres:
		if !ok {
			c.known = false
			return
		}
		var effects []effect
		for _, st := range stmts {
			if e := effectOf(st, postgres); e != noEffect {
				effects = append(effects, e)
			}
		}
		switch {
		case len(effects) == 0:
		case len(stmts) > 1 || effects[0] == unknown:
			// A text of several statements stops at the first error:
			// which of them ran is unknown here.
			c.known = false
		default:
			c.inTx, c.failed = effects[0] == begins, false
		}
	default:
		if !ok {
			c.inTx = true // no way to ask: assume the worst, a rollback settles it
			return
		}
		for _, st := range stmts {
			switch effectOf(st, generic) {
			case begins, unknown:
				c.inTx = true
			case ends:
				c.inTx = false
			}
		}
	}
}

// txProbe is a PostgreSQL setting the dialect sets for the current
// transaction only, to learn whether one is open.
const txProbe = "pooldriver.tx_probe"

// ask reads the transaction state from the server.
func (c *conn) ask(ctx context.Context, lastQuery string) error {
	switch c.d.server {
	case postgres:
		// A setting made for the transaction only survives into the next
		// statement if a transaction is open. In a failed transaction
		// every statement fails with 25P02.
		err := c.d.execRaw(ctx, "SELECT set_config('"+txProbe+"', 'on', true)")
		if sqlState(err) == "25P02" {
			c.inTx, c.failed, c.known = true, true, true
			return nil
		}
		if err != nil {
			return fmt.Errorf("pooldriver: odbc: reading the transaction state: %w", err)
		}
		row, err := c.d.queryRow(ctx, "SELECT current_setting('"+txProbe+"', true)")
		if err != nil {
			return fmt.Errorf("pooldriver: odbc: reading the transaction state: %w", err)
		}
		c.inTx, c.failed, c.known = row[0] == "on", false, true
		return nil
	case mysql:
		return c.askMySQL(ctx, lastQuery)
	}
	c.known = true
	return nil
}

// askMySQL reads @@in_transaction and @@autocommit in one round trip; on
// MySQL, which lacks @@in_transaction, it reads @@autocommit and infers the
// transaction from the statement's keywords (best effort).
func (c *conn) askMySQL(ctx context.Context, lastQuery string) error {
	if c.inTxVar >= 0 {
		row, err := c.d.queryRow(ctx, "SELECT @@in_transaction, @@autocommit")
		switch {
		case err == nil:
			c.inTxVar = 1
			c.inTx, c.autocommit, c.known = row[0] != "0", row[1] != "0", true
			return nil
		case c.d.bad || c.inTxVar == 1:
			return fmt.Errorf("pooldriver: odbc: reading the transaction state: %w", err)
		}
		c.inTxVar = -1
	}
	row, err := c.d.queryRow(ctx, "SELECT @@autocommit")
	if err != nil {
		return fmt.Errorf("pooldriver: odbc: reading the transaction state: %w", err)
	}
	c.autocommit = row[0] != "0"
	stmts, _ := statements(lastQuery, mysql)
	for _, st := range stmts {
		switch e := effectOf(st, mysql); {
		case e == begins:
			c.inTx = true
		case e == ends:
			c.inTx = false
		case !c.autocommit && len(st) > 0 && st[0] != "SET":
			c.inTx = true
		}
	}
	c.known = true
	return nil
}

// Rollback ends the open transaction: the one BeginTx began, through it,
// else by a raw ROLLBACK (harmless when none is open).
func (c *conn) Rollback(ctx context.Context) error {
	if c.d.bad {
		return errBroken
	}
	var err error
	if t := c.d.tx; t != nil {
		err = t.Rollback()
	} else {
		err = c.d.execRaw(ctx, "ROLLBACK")
	}
	if err != nil {
		c.known = false
		return fmt.Errorf("pooldriver: odbc: rollback: %w", err)
	}
	c.inTx, c.failed = false, false
	c.known = c.d.server != mysql || c.autocommit
	return nil
}

// ResetSession resets a PostgreSQL session: ROLLBACK, DISCARD ALL, then the
// settings the driver made when it connected (psqlODBC's DateStyle and
// extra_float_digits, the ConnSettings attribute's). Other servers have no
// reset reachable through ODBC: it returns dialects.ErrUnsupported, and
// pooldriver closes the connection and opens a new one.
func (c *conn) ResetSession(ctx context.Context) error {
	if c.d.bad {
		return errBroken
	}
	if c.d.server != postgres {
		return fmt.Errorf("pooldriver: odbc: no session reset for a %s server: %w", c.d.server, dialects.ErrUnsupported)
	}
	if err := c.Rollback(ctx); err != nil {
		return err
	}
	if err := c.d.execRaw(ctx, "DISCARD ALL"); err != nil {
		return fmt.Errorf("pooldriver: odbc: reset session: %w", err)
	}
	for _, s := range c.settings {
		if _, err := c.d.queryRow(ctx, "SELECT set_config(?, ?, false)", s[0], s[1]); err != nil {
			return fmt.Errorf("pooldriver: odbc: reset session: restoring %s: %w", s[0], err)
		}
	}
	c.inTx, c.failed, c.known = false, false, true
	return nil
}

// start learns what a new connection needs to know: its transaction state
// (MariaDB/MySQL), or the settings to restore after a reset (PostgreSQL).
func (c *conn) start(ctx context.Context) error {
	c.known, c.autocommit = true, true
	switch c.d.server {
	case postgres:
		return c.d.queryRows(ctx, "SELECT name, setting FROM pg_settings WHERE source = 'session'", func(row []string) {
			c.settings = append(c.settings, [2]string{row[0], row[1]})
		})
	case mysql:
		c.known = false
		return c.askMySQL(ctx, "")
	}
	return nil
}

// Ping runs SELECT 1 on PostgreSQL and MariaDB/MySQL. For other servers no
// statement is known to work everywhere, so it only reports a connection
// already known to be lost.
func (c *conn) Ping(ctx context.Context) error {
	if c.d.bad {
		return errBroken
	}
	if c.d.server == generic {
		return nil
	}
	if _, err := c.d.queryRow(ctx, "SELECT 1"); err != nil {
		return fmt.Errorf("pooldriver: odbc: ping: %w", err)
	}
	return nil
}

// Close closes the connection: SQLDisconnect, which unixODBC passes on to
// the driver, since the dialect refuses to open connections that
// unixODBC's own pool would keep.
func (c *conn) Close() error { return c.d.Close() }
