package pooldriver

import (
	"context"
	"sync/atomic"
)

// A task as a context carries it, seen from its Connector: the pool's
// Begun and Shutdown ask the task in the context of an acquire when it
// began, through ctxTask, without reaching up into the task (task.go)
// that the logical side holds.

// taskSeq numbers the tasks in the order they begin (Shutdown admits
// those begun before it).
var taskSeq atomic.Uint64

type taskKey struct{}

// tasksBegun is set by the first WithTask: until then no context can carry
// a task, and a statement looks for none (taskFrom), which would walk the
// whole context chain, every layer a service added, for a key that is not
// there. Whoever is handed a task's context has a happens-before edge with
// the WithTask that made it (a call, a go statement, a channel), so it sees
// the flag set.
var tasksBegun atomic.Bool

// ctxTask is the task a context carries, as its Connector asks it: *task
// implements it.
type ctxTask interface {
	// began reports whether a statement of the task took a connection.
	began() bool
	// number is the task's number, in the order tasks began (taskSeq).
	number() uint64
}

// ctxTaskFrom returns the task ctx carries, or nil. Off the statement's
// path: taskFrom is the hold's, and returns the task itself.
func ctxTaskFrom(ctx context.Context) ctxTask {
	if !tasksBegun.Load() {
		return nil // no context carries one yet: see tasksBegun
	}
	t, _ := ctx.Value(taskKey{}).(ctxTask)
	return t
}

// taskBegun is the pools' Begun: whether ctx carries a task that already
// took a connection. Called only when a caller must wait.
func taskBegun(ctx context.Context) bool {
	t := ctxTaskFrom(ctx)
	return t != nil && t.began()
}
