// Package logline writes pooldriver's log lines: the "pooldriver: "
// prefix, the error last, and durations as a DSN writes them. The root
// package and the physical connection (internal/phys) both log through it.
package logline

import (
	"context"
	"log/slog"
	"strings"
	"time"
)

// At logs msg on l at level with err, when there is one, and args, with
// ctx for the handler (a task's or request's attributes). A nil l logs
// nothing. Durations are written as the DSN writes them ("5s", "1m30s"),
// whatever the handler: a JSON handler would write a time.Duration in
// nanoseconds.
func At(ctx context.Context, l *slog.Logger, level slog.Level, msg string, err error, args ...any) {
	if l == nil || !l.Enabled(ctx, level) {
		return
	}
	for i, a := range args {
		switch v := a.(type) {
		case time.Duration:
			args[i] = Duration(v)
		case slog.Attr:
			if v.Value.Kind() == slog.KindDuration {
				args[i] = slog.String(v.Key, Duration(v.Value.Duration()))
			}
		}
	}
	if err != nil {
		args = append(args, "error", err)
	}
	l.Log(ctx, level, "pooldriver: "+msg, args...)
}

// Duration writes d as a DSN would: 1h, 30m, 30s, 0 (Duration.String
// writes 1h0m0s, 30m0s, 0s).
func Duration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
