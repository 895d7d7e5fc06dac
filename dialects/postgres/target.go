package postgres

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pooldriver/pooldriver/dialects"
)

var _ dialects.TargetTemplate = (*template)(nil)

// Targeted returns a copy of t whose new connections go to a server that
// takes writes, where target is dialects.TargetPrimary (pool_target): as
// target_session_attrs=read-write asks, and the pool follows it
// (LostRole). A DSN whose target_session_attrs asks for a writable server
// already keeps its own; one that asks for another kind (standby,
// read-only, prefer-standby) is an error.
func (t *template) Targeted(target dialects.Target) (dialects.Template, error) {
	if target == dialects.TargetAny || t.role != roleAny {
		return t, nil
	}
	if t.cfg.ValidateConnect != nil {
		return nil, errors.New("pooldriver: postgres: pool_target=primary asks for a server that takes writes, and target_session_attrs (the DSN's, or PGTARGETSESSIONATTRS) for another kind: drop one")
	}
	n := *t
	n.cfg = t.cfg.Copy()
	n.cfg.ValidateConnect = pgconn.ValidateConnectTargetSessionAttrsReadWrite
	n.role = roleOf(n.cfg.ValidateConnect)
	return &n, nil
}
