package pooldriver

import (
	"context"
	"fmt"
)

// RawConn runs f with the real driver connection under a logical one, for
// features database/sql does not reach (pgx's CopyFrom, say). driverConn is
// what sql.Conn.Raw hands its callback:
//
//	err := sqlConn.Raw(func(driverConn any) error {
//		return pooldriver.RawConn(ctx, driverConn, func(raw any) error {
//			pgxConn := raw.(*pgx.Conn)
//			_, err := pgxConn.CopyFrom(ctx, ...)
//			return err
//		})
//	})
//
// The physical connection is the hold's (the *sql.Conn keeps it until it is
// closed), chosen as for a statement, and locked while f runs; f must not
// keep raw after it returns. pooldriver cannot see what f did to the
// session, so it resets the session before anyone else uses the connection.
func RawConn(ctx context.Context, driverConn any, f func(raw any) error) error {
	l, ok := driverConn.(*conn)
	if !ok {
		return fmt.Errorf("pooldriver: RawConn: %T is not a pooldriver connection", driverConn)
	}
	return l.do(ctx, opRaw, &lease{}, "", func(pc *physConn) error { return f(pc.dc.Raw()) })
}
