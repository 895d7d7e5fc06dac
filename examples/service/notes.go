package service

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/pooldriver/pooldriver"
)

// Note is a note as the API returns it.
type Note struct {
	ID        int64     `json:"id"`
	Body      string    `json:"body"`
	CreatedAt time.Time `json:"created_at"`
}

// createNote stores the request's body as a note, with its "created"
// event, in one raw transaction whose statements are separate db calls
// made by separate helpers: the request's task keeps them on one server
// connection while the transaction is open. A return before COMMIT leaves
// the rollback to the task's end (pooldriver.Middleware).
func (s *Service) createNote(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			s.fail(w, r, http.StatusRequestEntityTooLarge, "a note has 1 to 1000 characters", err)
		} else {
			s.fail(w, r, http.StatusBadRequest, "unreadable body", err)
		}
		return
	}
	ctx := r.Context()
	if _, err := s.db.ExecContext(ctx, "BEGIN"); err != nil {
		s.dbFail(w, r, err)
		return
	}
	n, err := insertNote(ctx, s.db, string(body))
	if err != nil {
		s.dbFail(w, r, err) // no ROLLBACK: the task's end runs it
		return
	}
	if err := recordEvent(ctx, s.db, n.ID, "created"); err != nil {
		s.dbFail(w, r, err)
		return
	}
	if _, err := s.db.ExecContext(ctx, "COMMIT"); err != nil {
		s.dbFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, n)
}

func insertNote(ctx context.Context, db *sql.DB, body string) (Note, error) {
	n := Note{Body: body}
	err := db.QueryRowContext(ctx, "INSERT INTO notes (body) VALUES ($1) RETURNING id, created_at", body).Scan(&n.ID, &n.CreatedAt)
	return n, err
}

func recordEvent(ctx context.Context, db *sql.DB, noteID int64, kind string) error {
	_, err := db.ExecContext(ctx, "INSERT INTO note_events (note_id, kind) VALUES ($1, $2)", noteID, kind)
	return err
}

func (s *Service) getNote(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, "the id is not a number", err)
		return
	}
	n := Note{ID: id}
	err = s.db.QueryRowContext(r.Context(), "SELECT body, created_at FROM notes WHERE id = $1", id).Scan(&n.Body, &n.CreatedAt)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		s.fail(w, r, http.StatusNotFound, "no such note", nil)
	case err != nil:
		s.dbFail(w, r, err)
	default:
		writeJSON(w, http.StatusOK, n)
	}
}

// listNotes returns the 20 newest notes.
func (s *Service) listNotes(w http.ResponseWriter, r *http.Request) {
	rows, err := s.db.QueryContext(r.Context(), "SELECT id, body, created_at FROM notes ORDER BY id DESC LIMIT 20")
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	defer func() { _ = rows.Close() }()
	notes := []Note{}
	for rows.Next() {
		var n Note
		if err := rows.Scan(&n.ID, &n.Body, &n.CreatedAt); err != nil {
			s.dbFail(w, r, err)
			return
		}
		notes = append(notes, n)
	}
	if err := rows.Err(); err != nil {
		s.dbFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, notes)
}

// health answers 200 when the database answers a ping.
func (s *Service) health(w http.ResponseWriter, r *http.Request) {
	if err := s.db.PingContext(r.Context()); err != nil {
		s.dbFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// dbFail answers a database error: 422 for a note the database refuses,
// 503 when no connection could be had (the pool's wait ended, its breaker
// refused, or the server refused the connection: at its connection limit,
// starting up, shutting down), 500 otherwise. The log line has the error,
// which says why.
func (s *Service) dbFail(w http.ResponseWriter, r *http.Request, err error) {
	var state interface{ SQLState() string } // *pgconn.PgError
	code := ""
	if errors.As(err, &state) {
		code = state.SQLState()
	}
	switch {
	case code == "23514": // check_violation
		s.fail(w, r, http.StatusUnprocessableEntity, "a note has 1 to 1000 characters", err)
	case errors.Is(err, pooldriver.ErrAcquireTimeout), errors.Is(err, pooldriver.ErrCircuitOpen),
		errors.Is(err, pooldriver.ErrBackoff), errors.Is(err, context.DeadlineExceeded),
		strings.HasPrefix(code, "53"), strings.HasPrefix(code, "57P"), strings.HasPrefix(code, "08"):
		// 53: insufficient resources (53300: too many connections); 57P:
		// the server is shutting down or starting; 08: connection
		// exceptions.
		s.fail(w, r, http.StatusServiceUnavailable, "the database is unavailable", err)
	default:
		s.fail(w, r, http.StatusInternalServerError, "internal error", err)
	}
}

// fail answers status with msg, and logs err (the cause, which the client
// does not see) with the request's trace; a server error is recorded on the
// request's span too.
func (s *Service) fail(w http.ResponseWriter, r *http.Request, status int, msg string, err error) {
	level := slog.LevelInfo
	if status >= http.StatusInternalServerError {
		level = slog.LevelError
		trace.SpanFromContext(r.Context()).RecordError(err)
	}
	args := []any{"status", status, "answer", msg}
	if err != nil {
		args = append(args, "err", err)
	}
	s.log.Log(r.Context(), level, "request failed", args...)
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client went away
}
