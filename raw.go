package pooldriver

import (
	"context"
	"database/sql/driver"
	"fmt"

	"github.com/pooldriver/pooldriver/internal/phys"
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
// Behind a wrapper of pooldriver's connector, driverConn is the wrapper's
// connection; RawConn looks through it when it says what it wraps with a
// method Raw() driver.Conn (XSAM/otelsql), WrappedConn() driver.Conn
// (DataDog's sqltrace) or Unwrap() driver.Conn, up to 16 wrappers deep.
// ngrok/sqlmw, instrumentedsql, ocsql and uptrace's otelsql expose nothing,
// and RawConn returns an error naming the type it could not look through.
//
// The physical connection is the hold's (the *sql.Conn keeps it until it is
// closed), chosen as for a statement, and locked while f runs; f must not
// keep raw after it returns. pooldriver cannot see what f did to the
// session, so it resets the session before anyone else uses the connection.
func RawConn(ctx context.Context, driverConn any, f func(raw any) error) error {
	l, ok := driverConn.(*conn)
	if !ok {
		var err error
		if l, err = connUnder(driverConn); err != nil {
			return err
		}
	}
	return l.do(ctx, opRaw, &lease{}, "", func(pc *phys.Conn) error { return pc.Raw(f) })
}

// connUnder follows the wrappers' connections from driverConn down to
// pooldriver's.
func connUnder(driverConn any) (*conn, error) {
	v := driverConn
	for depth := range maxWrappers {
		switch c := v.(type) {
		case *conn:
			if c != nil {
				return c, nil
			}
		case interface{ Raw() driver.Conn }:
			v = c.Raw()
			continue
		case interface{ WrappedConn() driver.Conn }:
			v = c.WrappedConn()
			continue
		case interface{ Unwrap() driver.Conn }:
			v = c.Unwrap()
			continue
		}
		if depth == 0 {
			return nil, fmt.Errorf("pooldriver: RawConn: %T is not a pooldriver connection, nor a wrapper that exposes the connection it wraps", driverConn)
		}
		return nil, fmt.Errorf("pooldriver: RawConn: %T wraps %T, which is not a pooldriver connection, nor a wrapper that exposes the connection it wraps", driverConn, v)
	}
	return nil, fmt.Errorf("pooldriver: RawConn: %T: more than %d wrappers deep, or one that unwraps to itself", driverConn, maxWrappers)
}
