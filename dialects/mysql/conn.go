package mysql

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/dialects/internal/sqllex"
)

// conn is one physical MySQL/MariaDB connection. It is not safe for
// concurrent use; pooldriver serializes all calls.
type conn struct {
	dc      driver.Conn
	execer  driver.ExecerContext
	queryer driver.QueryerContext
	pinger  driver.Pinger
	t       *template
	sock    net.Conn // the driver's socket, for COM_RESET_CONNECTION; nil if unusable

	// What the conn believes about the server session (see the package
	// doc). known is false when the next TxStatus must ask the server.
	known      bool
	inTx       bool
	autocommit bool
	inTxVar    int8 // 1: @@in_transaction exists; -1: it does not (MySQL); 0: not yet known
	broken     bool // a raw exchange failed; the protocol stream is lost
}

var (
	_ dialects.Conn            = (*conn)(nil)
	_ dialects.IdleChecker     = (*conn)(nil)
	_ dialects.SessionTracker  = (*conn)(nil)
	_ dialects.SessionBaseline = (*conn)(nil)
)

// CheckIdle looks, without a round trip, for the server having closed the
// connection while it was idle (KILL, wait_timeout, a restart). Without the
// socket (a connection of a wrapped connector, or with TLS, compression or
// a custom network) it asks the driver's ResetSession, which in
// go-sql-driver/mysql is that very check on the socket the driver keeps
// (unless the DSN says checkConnLiveness=false) and resets nothing.
func (c *conn) CheckIdle() error {
	if c.broken {
		return driver.ErrBadConn
	}
	if c.sock == nil {
		if r, ok := c.dc.(driver.SessionResetter); ok {
			return r.ResetSession(context.Background())
		}
		return nil
	}
	return dialects.CheckSocket(c.sock)
}

// newConn returns the conn for dc, a connection the template opened, or
// closes dc and fails if it lacks what the dialect needs.
func newConn(t *template, dc driver.Conn, sock net.Conn) (*conn, error) {
	c, ok := wrapConn(t, dc, sock)
	if !ok {
		_ = dc.Close()
		return nil, fmt.Errorf("pooldriver: mysql: driver connection %T lacks ExecContext, QueryContext or Ping", dc)
	}
	return c, nil
}

// wrapConn returns the conn for dc, or false if dc lacks ExecContext,
// QueryContext or Ping. t and sock are nil for a connection the dialect
// did not open (see adapt): it cannot reset its session.
func wrapConn(t *template, dc driver.Conn, sock net.Conn) (*conn, bool) {
	c := &conn{dc: dc, t: t, sock: sock}
	var ok1, ok2, ok3 bool
	c.execer, ok1 = dc.(driver.ExecerContext)
	c.queryer, ok2 = dc.(driver.QueryerContext)
	c.pinger, ok3 = dc.(driver.Pinger)
	return c, ok1 && ok2 && ok3
}

// ChangesSession reports a statement that may have changed the session:
// SET (any), user variables assigned by SELECT ... INTO @var or :=,
// GET_LOCK and RELEASE_*LOCK*, LOCK/UNLOCK, temporary tables, PREPARE and
// DEALLOCATE, USE, HANDLER, XA, executable comments, ... (see
// sqllex.ChangesSession), read with MySQL's quoting and comments, and
// either backslash setting when a string holds a backslash.
func (c *conn) ChangesSession(query string) bool {
	return sqllex.Of(query, sqllex.MySQL).ChangesSession
}

// Driver returns the go-sql-driver/mysql connection.
func (c *conn) Driver() driver.Conn { return c.dc }

// Raw returns the go-sql-driver/mysql connection; its type is unexported,
// so it is of use through the database/sql/driver interfaces only.
func (c *conn) Raw() any { return c.dc }

// TxStatus asks the server only when lastQuery may have changed the
// transaction state or autocommit is believed off; see the package doc.
func (c *conn) TxStatus(ctx context.Context, lastQuery string) (dialects.TxStatus, error) {
	if c.broken {
		return dialects.TxIdle, errBroken
	}
	if lastQuery != "" && (!c.autocommit || txMemo.Get(lastQuery)) {
		c.known = false
	}
	if !c.known {
		if err := c.refresh(ctx, lastQuery); err != nil {
			return dialects.TxIdle, err
		}
	}
	if c.inTx {
		return dialects.TxActive, nil
	}
	return dialects.TxIdle, nil
}

// MarkBaseline forgets the cached transaction state: statements ran on the
// driver connection behind the conn's back (see dialects.SessionBaseline),
// so the next TxStatus asks the server.
func (c *conn) MarkBaseline() { c.known = false }

var errBroken = fmt.Errorf("pooldriver: mysql: connection lost its protocol state: %w", driver.ErrBadConn)

// erUnknownSystemVariable is the server's error number for @@in_transaction
// on servers that lack it (MySQL).
const erUnknownSystemVariable = 1193

// refresh asks the server whether a transaction is open and whether
// autocommit is on, in one round trip.
func (c *conn) refresh(ctx context.Context, lastQuery string) error {
	if c.inTxVar >= 0 {
		v, err := c.queryInts(ctx, "SELECT @@in_transaction, @@autocommit")
		var me *mysql.MySQLError
		switch {
		case err == nil:
			c.inTxVar = 1
			c.inTx, c.autocommit, c.known = v[0] != 0, v[1] != 0, true
			return nil
		case errors.As(err, &me) && me.Number == erUnknownSystemVariable:
			c.inTxVar = -1
		default:
			return fmt.Errorf("pooldriver: mysql: reading the transaction state: %w", err)
		}
	}
	// No @@in_transaction: autocommit from the server, the transaction
	// from the statement's keywords (best effort).
	v, err := c.queryInts(ctx, "SELECT @@autocommit")
	if err != nil {
		return fmt.Errorf("pooldriver: mysql: reading the transaction state: %w", err)
	}
	c.autocommit = v[0] != 0
	keywords, _ := statementKeywords(lastQuery)
	for _, k := range keywords {
		switch {
		case k == "BEGIN" || k == "START":
			c.inTx = true
		case k == "COMMIT" || k == "ROLLBACK":
			c.inTx = false
		case !c.autocommit && k != "SET":
			c.inTx = true
		}
	}
	c.known = true
	return nil
}

// queryInts runs a one-row query whose columns are integers.
func (c *conn) queryInts(ctx context.Context, query string) ([]int64, error) {
	rows, err := c.queryer.QueryContext(ctx, query, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }() // the row is read; a broken connection fails its next use
	dest := make([]driver.Value, len(rows.Columns()))
	if err := rows.Next(dest); err != nil {
		if err == io.EOF {
			return nil, fmt.Errorf("%s: no row", query)
		}
		return nil, err
	}
	out := make([]int64, len(dest))
	for i, v := range dest {
		switch v := v.(type) {
		case int64:
			out[i] = v
		case uint64:
			out[i] = int64(v)
		case []byte:
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: column %d: %w", query, i, err)
			}
			out[i] = n
		default:
			return nil, fmt.Errorf("%s: column %d is %T", query, i, v)
		}
	}
	return out, nil
}

// Rollback sends a raw ROLLBACK. Autocommit is left as it is.
func (c *conn) Rollback(ctx context.Context) error {
	if c.broken {
		return errBroken
	}
	if _, err := c.execer.ExecContext(ctx, "ROLLBACK", nil); err != nil {
		c.known = false
		return fmt.Errorf("pooldriver: mysql: rollback: %w", err)
	}
	c.inTx = false
	return nil
}

// comResetConnection is the protocol command that resets a session.
const comResetConnection = 0x1f

// ResetSession sends COM_RESET_CONNECTION on the driver's socket, then
// restores what the driver set up at connect time (SET NAMES and the DSN's
// system variables), and reads the transaction state afresh.
//
// With TLS, compression or a custom network the socket is out of reach and
// ResetSession returns an error: pooldriver then closes the connection. So
// it is for a connection that pooldriver.Wrap's connector opened, whose
// socket the dialect never saw: ResetSession returns an error that
// matches dialects.ErrUnsupported.
func (c *conn) ResetSession(ctx context.Context) error {
	if c.broken {
		return errBroken
	}
	if c.t == nil {
		return fmt.Errorf("pooldriver: mysql: no session reset for a connection of a wrapped connector: %w", dialects.ErrUnsupported)
	}
	if c.sock == nil {
		return fmt.Errorf("pooldriver: mysql: no session reset available: %s", c.t.noRawReset)
	}
	if err := c.rawReset(ctx); err != nil {
		return err
	}
	// The reset reverts the character set and every session variable to the
	// server's defaults. The SET NAMES also refreshes the driver's copy of
	// the server status flags, which decides how it escapes interpolated
	// arguments (NO_BACKSLASH_ESCAPES).
	if err := c.restoreSession(ctx); err != nil {
		return err
	}
	c.known = false
	return c.refresh(ctx, "")
}

// aLongTimeAgo is a deadline in the past, to interrupt blocked I/O.
var aLongTimeAgo = time.Unix(1, 0)

// rawReset exchanges COM_RESET_CONNECTION with the server, bypassing the
// driver, which is idle: pooldriver never runs a statement and a session
// call at once. Unless the server answered, the connection is marked broken.
func (c *conn) rawReset(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	nc := c.sock
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	interrupted := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = nc.SetDeadline(aLongTimeAgo)
		close(interrupted)
	})
	serverErr, err := exchangeReset(nc)
	if !stop() {
		<-interrupted
		if err == nil {
			err = ctx.Err() // the deadline in the past would hit the driver next
		}
	}
	if err != nil {
		c.broken = true
		return fmt.Errorf("pooldriver: mysql: reset session: %w", err)
	}
	_ = nc.SetDeadline(time.Time{})
	if serverErr != nil {
		return fmt.Errorf("pooldriver: mysql: reset session: %w", serverErr)
	}
	return nil
}

// exchangeReset writes COM_RESET_CONNECTION and reads the reply: OK, or an
// ERR returned as serverErr.
func exchangeReset(nc net.Conn) (serverErr *mysql.MySQLError, err error) {
	// A packet: 3-byte length, sequence number 0, the command byte.
	if _, err := nc.Write([]byte{1, 0, 0, 0, comResetConnection}); err != nil {
		return nil, err
	}
	var hdr [4]byte
	if _, err := io.ReadFull(nc, hdr[:]); err != nil {
		return nil, err
	}
	n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
	if n == 0 || n == 0xffffff {
		return nil, fmt.Errorf("unexpected reply of %d bytes", n)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(nc, payload); err != nil {
		return nil, err
	}
	switch payload[0] {
	case 0x00: // OK
		return nil, nil
	case 0xff: // ERR: code, optional '#' + SQLSTATE, message
		if len(payload) < 3 {
			return nil, errors.New("short error reply")
		}
		me := &mysql.MySQLError{Number: uint16(payload[1]) | uint16(payload[2])<<8}
		msg := payload[3:]
		if len(msg) >= 6 && msg[0] == '#' {
			copy(me.SQLState[:], msg[1:6])
			msg = msg[6:]
		}
		me.Message = string(msg)
		return me, nil
	default:
		return nil, fmt.Errorf("unexpected reply 0x%02x", payload[0])
	}
}

// restoreSession repeats what the driver does after logging in: SET NAMES
// for the DSN's charset (or the handshake's collation) and one SET for the
// DSN's system variables.
func (c *conn) restoreSession(ctx context.Context) error {
	cfg := c.t.cfg
	var err error
	if len(c.t.charsets) > 0 {
		for _, cs := range c.t.charsets {
			q := "SET NAMES " + cs
			if cfg.Collation != "" {
				q += " COLLATE " + cfg.Collation
			}
			if _, err = c.execer.ExecContext(ctx, q, nil); err == nil {
				break
			}
		}
	} else {
		collation := cfg.Collation
		if collation == "" {
			collation = "utf8mb4_general_ci" // the driver's handshake default
		}
		charset, _, _ := strings.Cut(collation, "_")
		_, err = c.execer.ExecContext(ctx, "SET NAMES "+charset+" COLLATE "+collation, nil)
	}
	if err != nil {
		return fmt.Errorf("pooldriver: mysql: reset session: restoring the character set: %w", err)
	}
	if len(cfg.Params) > 0 {
		var b strings.Builder
		for k, v := range cfg.Params {
			if b.Len() == 0 {
				b.WriteString("SET ")
			} else {
				b.WriteString(", ")
			}
			b.WriteString(k + " = " + v)
		}
		if _, err := c.execer.ExecContext(ctx, b.String(), nil); err != nil {
			return fmt.Errorf("pooldriver: mysql: reset session: restoring the DSN's system variables: %w", err)
		}
	}
	if cfg.DBName != "" {
		if _, err := c.execer.ExecContext(ctx, "USE "+quoteIdent(cfg.DBName), nil); err != nil {
			return fmt.Errorf("pooldriver: mysql: reset session: selecting the database: %w", err)
		}
	}
	return nil
}

func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// Ping runs COM_PING through the driver.
func (c *conn) Ping(ctx context.Context) error {
	if c.broken {
		return errBroken
	}
	if err := c.pinger.Ping(ctx); err != nil {
		return fmt.Errorf("pooldriver: mysql: ping: %w", err)
	}
	return nil
}

// Close closes the connection.
func (c *conn) Close() error { return c.dc.Close() }

// RollbackBeginTx ends a transaction begun with the driver's BeginTx by a
// raw ROLLBACK under ctx (see dialects.BeginTxRollbacker).
func (c *conn) RollbackBeginTx(ctx context.Context) error { return c.Rollback(ctx) }
