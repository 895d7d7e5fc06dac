package dialects

import (
	"context"
	"fmt"
)

// The typed adapters of pooldriver's connection hooks: a dialect exports
// one per hook (postgres.BeforeAcquire, mysql.AfterRelease, ...), each
// built with these, so that a hook takes the dialect's own connection
// type (the one pooldriver.RawConn gives) and a hook meant for another
// dialect says so rather than misbehaving. h says how: the adapter's name
// for errors ("postgres.BeforeAcquire"), what to use it with, and how to
// tell the dialect's connection (As, where its type says it).

// RawHook describes a typed hook adapter of a dialect, for connections of
// type T.
type RawHook[T any] struct {
	Name string                  // the adapter, as errors name it
	Want string                  // what to use it with, for the error
	As   func(raw any) (T, bool) // the dialect's connection, or false
}

// As is RawHook.As for a dialect whose connections have a type of their
// own: a type assertion.
func As[T any](raw any) (T, bool) {
	c, ok := raw.(T)
	return c, ok
}

// AfterConnect adapts f for pooldriver.WithAfterConnect (and
// WithBeforeAcquire, whose signature is the same).
func (h RawHook[T]) AfterConnect(f func(context.Context, T) error) func(context.Context, any) error {
	return func(ctx context.Context, raw any) error {
		c, ok := h.As(raw)
		if !ok {
			return h.wrong(raw)
		}
		return f(ctx, c)
	}
}

// AfterRelease adapts f for pooldriver.WithAfterRelease. On another
// dialect's connection it panics, which pooldriver counts as the hook's
// failure: logged, and the connection closed.
func (h RawHook[T]) AfterRelease(f func(T) bool) func(any) bool {
	return func(raw any) bool {
		c, ok := h.As(raw)
		if !ok {
			panic(h.wrong(raw))
		}
		return f(c)
	}
}

// BeforeClose adapts f for pooldriver.WithBeforeClose. On another
// dialect's connection it panics, which pooldriver logs.
func (h RawHook[T]) BeforeClose(f func(T)) func(any) {
	return func(raw any) {
		c, ok := h.As(raw)
		if !ok {
			panic(h.wrong(raw))
		}
		f(c)
	}
}

// wrong is the error of a typed hook given another dialect's connection.
func (h RawHook[T]) wrong(raw any) error {
	return fmt.Errorf("%s: the connection is %T, not this dialect's: %s", h.Name, raw, h.Want)
}
