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
// The physical connection is chosen as for a statement (the transaction's,
// the task's, or one from the pool) and held while f runs; f must not keep
// raw after it returns.
func RawConn(ctx context.Context, driverConn any, f func(raw any) error) error {
	l, ok := driverConn.(*conn)
	if !ok {
		return fmt.Errorf("pooldriver: RawConn: %T is not a pooldriver connection", driverConn)
	}
	le, err := l.acquire(ctx)
	if err != nil {
		return err
	}
	err = f(le.pc.dc.Raw())
	le.pc.checkErr(err)
	le.pc.observe(ctx, "")
	if ferr := l.finish(le); err == nil {
		err = ferr
	}
	return err
}
