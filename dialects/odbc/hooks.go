package odbc

import (
	"context"

	"github.com/alexbrainman/odbc"

	"github.com/pooldriver/pooldriver/dialects"
)

// Typed adapters of pooldriver's connection hooks: f gets the *odbc.Conn
// of github.com/alexbrainman/odbc, as pooldriver.RawConn gives it. An
// adapter used with another dialect's connection fails (AfterConnect,
// BeforeAcquire) or panics, which pooldriver logs (AfterRelease, which
// then closes the connection; BeforeClose).

// AfterConnect adapts f for pooldriver.WithAfterConnect.
func AfterConnect(f func(ctx context.Context, c *odbc.Conn) error) func(ctx context.Context, raw any) error {
	return hook("odbc.AfterConnect").AfterConnect(f)
}

// BeforeAcquire adapts f for pooldriver.WithBeforeAcquire.
func BeforeAcquire(f func(ctx context.Context, c *odbc.Conn) error) func(ctx context.Context, raw any) error {
	return hook("odbc.BeforeAcquire").AfterConnect(f)
}

// AfterRelease adapts f for pooldriver.WithAfterRelease.
func AfterRelease(f func(c *odbc.Conn) bool) func(raw any) bool {
	return hook("odbc.AfterRelease").AfterRelease(f)
}

// BeforeClose adapts f for pooldriver.WithBeforeClose.
func BeforeClose(f func(c *odbc.Conn)) func(raw any) {
	return hook("odbc.BeforeClose").BeforeClose(f)
}

// hook describes the typed hook adapter name.
func hook(name string) dialects.RawHook[*odbc.Conn] {
	return dialects.RawHook[*odbc.Conn]{Name: name, Want: "use it with an odbc:// DSN", As: dialects.As[*odbc.Conn]}
}
