package pooldriver

import (
	"testing"
	"time"
)

// TestLazyTimeoutLeftToLateReaders: a rows' Close context that somebody
// used (a driver asked for its Done channel) is ended by release and left
// as it is to whoever still holds it (go-sql-driver's watcher goroutine
// may read it after the statement returned, where its connection died):
// Close makes a new one rather than reuse it. One nobody used is reused.
func TestLazyTimeoutLeftToLateReaders(t *testing.T) {
	used := &lazyTimeout{d: time.Minute}
	held := used.Done() // a driver has it
	if used.release() {
		t.Fatal("a used context is offered for reuse")
	}
	select {
	case <-held:
	default:
		t.Fatal("release did not end the context its holder waits on")
	}
	late := make(chan struct{})
	go func() { // a holder reading it late
		defer close(late)
		if used.Err() == nil {
			t.Error("a late reader finds the context going on")
		}
	}()
	<-late
	unused := &lazyTimeout{d: time.Minute}
	if !unused.release() || unused.d != 0 {
		t.Fatal("an unused context is not offered for reuse, zeroed")
	}
}
