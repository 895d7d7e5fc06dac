package dialects

import (
	"context"
	"strings"
	"testing"
)

type rawA struct{ n int }

// TestRawHook: each adapter passes the dialect's connection on, and says,
// naming itself and what to use it with, when it gets another's:
// AfterConnect with its error, AfterRelease and BeforeClose with a panic
// (which pooldriver counts as the hook's failure).
func TestRawHook(t *testing.T) {
	h := RawHook[*rawA]{Name: "test.Hook", Want: "use it with test://", As: As[*rawA]}
	own := &rawA{n: 7}
	var got []int
	ac := h.AfterConnect(func(_ context.Context, c *rawA) error { got = append(got, c.n); return nil })
	ar := h.AfterRelease(func(c *rawA) bool { got = append(got, c.n); return true })
	bc := h.BeforeClose(func(c *rawA) { got = append(got, c.n) })
	if err := ac(context.Background(), own); err != nil || !ar(own) {
		t.Fatalf("on the dialect's connection: %v", err)
	}
	bc(own)
	if len(got) != 3 || got[0] != 7 || got[2] != 7 {
		t.Fatalf("the hooks got %v, want the connection three times", got)
	}
	wantMsg := func(msg string) {
		t.Helper()
		for _, w := range []string{"test.Hook", "string", "use it with test://"} {
			if !strings.Contains(msg, w) {
				t.Errorf("%q does not say %q", msg, w)
			}
		}
	}
	err := ac(context.Background(), "another's")
	if err == nil {
		t.Fatal("AfterConnect took another dialect's connection")
	}
	wantMsg(err.Error())
	for name, f := range map[string]func(){"AfterRelease": func() { ar("another's") }, "BeforeClose": func() { bc("another's") }} {
		func() {
			defer func() {
				x := recover()
				e, ok := x.(error)
				if !ok {
					t.Fatalf("%s on another dialect's connection: recovered %v, want an error", name, x)
				}
				wantMsg(e.Error())
			}()
			f()
		}()
	}
	if len(got) != 3 {
		t.Fatalf("a hook ran on another dialect's connection: %v", got)
	}
}
