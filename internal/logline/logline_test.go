package logline

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                                        "0",
		time.Hour:                                "1h",
		30 * time.Minute:                         "30m",
		30 * time.Second:                         "30s",
		90 * time.Second:                         "1m30s",
		1500 * time.Millisecond:                  "1.5s",
		time.Hour + 30*time.Second:               "1h0m30s",
		2*time.Hour + 5*time.Minute:              "2h5m",
		250 * time.Millisecond:                   "250ms",
		-5 * time.Minute:                         "-5m",
		time.Hour + 30*time.Minute + time.Second: "1h30m1s",
	} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestAt(t *testing.T) {
	At(context.Background(), nil, slog.LevelError, "nothing", nil) // a nil logger logs nothing, and does not panic

	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	At(context.Background(), l, slog.LevelDebug, "below the level", nil)
	if buf.Len() != 0 {
		t.Fatalf("a line below the handler's level was written: %s", buf.String())
	}
	At(context.Background(), l, slog.LevelWarn, "held long", errors.New("boom"), "held", 90*time.Second, slog.Duration("timeout", 30*time.Minute))
	line := buf.String()
	for _, want := range []string{`"msg":"pooldriver: held long"`, `"held":"1m30s"`, `"timeout":"30m"`, `"error":"boom"`, `"level":"WARN"`} {
		if !strings.Contains(line, want) {
			t.Errorf("the line lacks %s: %s", want, line)
		}
	}
}
