package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/dialects/internal/sqllex"
)

var _ dialects.StandbyTemplates = (*template)(nil)

// Standbys returns, for a DSN that names two or more hosts, one template
// per host in the DSN's order (see dialects.StandbyTemplates). Each is the
// template itself (the pooler check, the exec mode, the catalog reading
// are the same) but for three things:
//
//   - it connects to its host alone: every entry pgx made of that host and
//     port, in pgx's order and with its TLS configuration (sslmode=prefer
//     makes two, with TLS and without), and none of the other hosts';
//   - a new connection is refused unless the server is in recovery
//     (target_session_attrs=standby), with an error that matches
//     dialects.ErrNotStandby (and pgconn.ErrPrimaryConnection);
//   - it asks for no writable server: its connections are not closed as
//     having lost their role (LostRole) when the server reports
//     in_hot_standby, which for them is the point.
//
// Its String is its DSN with that host alone and
// target_session_attrs=standby, the password masked as in the template's.
// nil for a DSN of one host, and for a template that Standbys returned.
func (t *template) Standbys() []dialects.Template {
	if t.hosts == nil {
		return nil
	}
	all := append([]*pgconn.FallbackConfig{{Host: t.cfg.Host, Port: t.cfg.Port, TLSConfig: t.cfg.TLSConfig}}, t.cfg.Fallbacks...)
	var order []hostPort
	byHost := map[hostPort][]int{} // indexes into all
	for i, f := range all {
		hp := hostPort{f.Host, f.Port}
		if _, seen := byHost[hp]; !seen {
			order = append(order, hp)
		}
		byHost[hp] = append(byHost[hp], i)
	}
	out := make([]dialects.Template, 0, len(order))
	for _, hp := range order {
		n := *t
		n.cfg = t.cfg.Copy() // its own copies of the TLS configurations
		entries := append([]*pgconn.FallbackConfig{{Host: n.cfg.Host, Port: n.cfg.Port, TLSConfig: n.cfg.TLSConfig}}, n.cfg.Fallbacks...)
		idx := byHost[hp]
		first := entries[idx[0]]
		n.cfg.Host, n.cfg.Port, n.cfg.TLSConfig = first.Host, first.Port, first.TLSConfig
		n.cfg.Fallbacks = nil
		for _, i := range idx[1:] {
			n.cfg.Fallbacks = append(n.cfg.Fallbacks, entries[i])
		}
		n.cfg.ValidateConnect = validateStandby
		n.role = roleAny
		n.hosts = nil
		n.reached = nil // its readings prove no reads: the primary's do
		n.redacted = oneHostDSN(t.redacted, hp.host, hp.port)
		out = append(out, &n)
	}
	return out
}

// errPrimary is a standby template's refusal of a primary.
var errPrimary = fmt.Errorf("%w (%w)", dialects.ErrNotStandby, pgconn.ErrPrimaryConnection)

// validateStandby is pgx's check for target_session_attrs=standby, its
// refusal of a primary made to match dialects.ErrNotStandby.
func validateStandby(ctx context.Context, pg *pgconn.PgConn) error {
	err := pgconn.ValidateConnectTargetSessionAttrsStandby(ctx, pg)
	if errors.Is(err, pgconn.ErrPrimaryConnection) {
		return errPrimary
	}
	return err
}

// oneHostDSN rewrites dsn, a DSN as split left it (URL or keyword/value),
// to name host and port alone, with target_session_attrs=standby. The
// DSN's own host, port and target_session_attrs parameters go; the rest,
// the user information included, stays as written.
func oneHostDSN(dsn, host string, port uint16) string {
	p := strconv.FormatUint(uint64(port), 10)
	for _, prefix := range []string{"postgresql://", "postgres://"} {
		if rest, ok := strings.CutPrefix(dsn, prefix); ok {
			return prefix + oneHostURL(rest, host, p)
		}
	}
	return oneHostKeywordValue(dsn, host, p)
}

// dropsForOneHost reports a parameter that a one-host DSN replaces.
func dropsForOneHost(key string) bool {
	return key == "host" || key == "port" || key == "target_session_attrs"
}

// oneHostURL is oneHostDSN for what follows a URL's scheme. A unix
// socket's directory cannot stand in the URL's authority: it goes into
// the query, as pgx reads it there.
func oneHostURL(rest, host, port string) string {
	base, query, hasQuery := strings.Cut(rest, "?")
	var user string
	if i := strings.IndexAny(base, "@/"); i >= 0 && base[i] == '@' {
		user, base = base[:i+1], base[i+1:]
	}
	var path string
	if i := strings.IndexByte(base, '/'); i >= 0 {
		path = base[i:]
	}
	var pairs []string
	if hasQuery {
		for pair := range strings.SplitSeq(query, "&") {
			key, _, _ := strings.Cut(pair, "=")
			if pair != "" && !dropsForOneHost(lenientDecode(key)) {
				pairs = append(pairs, pair)
			}
		}
	}
	var authority string
	if strings.HasPrefix(host, "/") {
		pairs = append(pairs, "host="+url.QueryEscape(host), "port="+port)
	} else {
		authority = net.JoinHostPort(host, port)
	}
	pairs = append(pairs, "target_session_attrs=standby")
	return user + authority + path + "?" + strings.Join(pairs, "&")
}

// oneHostKeywordValue is oneHostDSN for a keyword/value DSN.
func oneHostKeywordValue(dsn, host, port string) string {
	pairs, _ := tokenizeKeywordValue(dsn) // it tokenized before pgx parsed it
	kept := make([]string, 0, len(pairs)+3)
	for _, p := range pairs {
		if !dropsForOneHost(p.key) {
			kept = append(kept, dsn[p.start:p.end])
		}
	}
	kept = append(kept, "host="+quoteKeywordValue(host), "port="+port, "target_session_attrs=standby")
	return strings.Join(kept, " ")
}

// quoteKeywordValue writes v as a keyword/value DSN's value: quoted where
// it is empty or holds a space, a quote or a backslash.
func quoteKeywordValue(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\n\v\f\r'\\") {
		return v
	}
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	return "'" + r.Replace(v) + "'"
}

var _ dialects.StandbyRefusals = (*template)(nil)

// serializationFailure is SQLSTATE 40001, which a standby also returns
// for a query it cancels for a conflict with recovery.
const serializationFailure = "40001"

// SQLSTATEs of an object a statement names that the server does not have:
// on a standby, one it has not replayed yet.
const (
	undefinedFunction = "42883"
	undefinedTable    = "42P01"
	invalidSchemaName = "3F000"
	// notSupported: among others, a standby's refusal of an unlogged or
	// temporary relation's read ("cannot access temporary or unlogged
	// relations during recovery"), made before a reading saw it.
	notSupported = "0A000"
)

// RefusedByStandby reports whether err, a statement's on a standby's
// connection, is one the primary may not have returned: a write refused
// (25006), a query cancelled for a conflict with recovery (40001), a
// function, relation or schema it does not know (42883, 42P01, 3F000),
// which the primary may have made a moment ago (a deploy's migration)
// and the standby not replayed yet, within pool_max_replica_lag, or a
// feature it does not support in recovery (0A000: an unlogged table's
// read). On the primary the statement may fail the same way: one round
// trip more.
func (t *template) RefusedByStandby(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case readOnlyTransaction, serializationFailure, undefinedFunction, undefinedTable, invalidSchemaName, notSupported:
		return true
	}
	return false
}

var _ dialects.ReadProver = (*template)(nil)

// ReadsOnly reports whether a standby runs query as the primary would,
// by the catalog reading its connections last used (see reading): one
// SELECT that only reads by its words, calls only built-ins that write
// nothing and user functions the reading proves reads, and names no
// relation the reading says a standby answers differently or that runs
// code its text does not show (sqllex.ReadsOnStandby). A call of a user's
// function is proved only by a fresh reading (not older than
// dialects.CatalogTTL, nor expired by user code that ran since: its body
// may have changed); where the reading is due, a text that calls only
// built-ins is still judged by it (see reading).
func (t *template) ReadsOnly(query string) bool {
	s, fresh := t.reading()
	if s == nil || !fresh && sqllex.Of(query, sqllex.Postgres).Calls != sqllex.CallsKnown {
		return false
	}
	return sqllex.ReadsOnStandby(query, s)
}

// StandbyDiffers reports whether query names a relation the catalog
// reading says a standby answers differently, or anything that runs code
// the text does not show (a relation, a user's operator or cast:
// Refs.Meets; see dialects.ReadProver); without a reading it cannot say:
// true, and the primary serves the read.
func (t *template) StandbyDiffers(query string) bool {
	s, _ := t.reading()
	if s == nil {
		return true
	}
	refs := sqllex.Of(query, sqllex.Postgres).Refs
	return refs.NamesAny(s.Standby) || refs.Meets(s)
}

// reading returns what the catalog reading the primary's connections
// last used says, and whether it is fresh; nil where there is none, or
// it is older than DDL the process ran (a statement's text showed it).
// What it says of relations (Shadows.Standby, Names) changes only by
// DDL: a reading that is due by its age or by user code that ran since
// still tells it, but for what another client's DDL made within
// dialects.CatalogTTL (an unlogged table made a moment ago: a standby
// refuses its read, 0A000, and it runs again on the primary).
func (t *template) reading() (s *sqllex.Shadows, fresh bool) {
	if t.reached == nil {
		return nil, false
	}
	cat := t.reached.Load()
	if cat == nil {
		return nil, false
	}
	snap := cat.Current()
	if snap == nil || !snap.Sees(cat.Changed()) {
		return nil, false
	}
	return snap.Value.shadows, !snap.Due()
}
