package odbc

import (
	"database/sql"
	"database/sql/driver"
	"slices"
	"strings"
	"testing"
)

func TestStatements(t *testing.T) {
	for _, tc := range []struct {
		query  string
		server server
		want   string // statements joined by '|', words by ' '; "!" when not ok
	}{
		{"SELECT 1", postgres, "SELECT 1"},
		{"  /* c */ begin", postgres, "BEGIN"},
		{"BEGIN; INSERT INTO t VALUES (';'); COMMIT", postgres, "BEGIN|INSERT INTO T VALUES|COMMIT"},
		{"rollback to savepoint a", postgres, "ROLLBACK TO SAVEPOINT A"},
		{"COMMIT AND NO CHAIN", mysql, "COMMIT AND NO CHAIN"},
		{"(SELECT 1)", mysql, "SELECT"},
		{"-- x\nCOMMIT", postgres, "COMMIT"},
		{"# x\nCOMMIT", mysql, "COMMIT"},
		{"-- x\rCOMMIT", postgres, "COMMIT"}, // PostgreSQL ends -- at '\r'
		{"-- x\rCOMMIT", mysql, ""},
		{"-- x\rCOMMIT", generic, "!"},
		{"SELECT 1 --\x7f\nCOMMIT", mysql, "!"},
		{"SELECT 'a\\'; COMMIT'", mysql, "!"},
		{"SELECT $$;$$", postgres, "!"},
		{"SELECT $1", postgres, "SELECT"},
		{"/*!40101 START TRANSACTION */", mysql, "!"},
		{"/* /* */ */ COMMIT", postgres, "!"},
		{"SELECT 'x", generic, "!"},
		{"; ;", generic, ""},
		{"+1", generic, "!"},
		{"SELECT f(x) FROM t", postgres, "SELECT F"},
	} {
		stmts, ok := statements(tc.query, tc.server)
		got := "!"
		if ok {
			var parts []string
			for _, s := range stmts {
				parts = append(parts, strings.Join(s, " "))
			}
			got = strings.Join(parts, "|")
		}
		if got != tc.want {
			t.Errorf("statements(%q, %s) = %q, want %q", tc.query, tc.server, got, tc.want)
		}
	}
}

func TestEffectOf(t *testing.T) {
	for _, tc := range []struct {
		query  string
		server server
		want   effect
	}{
		{"BEGIN", postgres, begins},
		{"start transaction read only", mysql, begins},
		{"COMMIT", postgres, ends},
		{"END", postgres, ends},
		{"END", mysql, unknown},
		{"ABORT", postgres, ends},
		{"ROLLBACK WORK", generic, ends},
		{"ROLLBACK TO SAVEPOINT a", postgres, noEffect},
		{"ROLLBACK WORK TO a", mysql, noEffect},
		{"COMMIT AND CHAIN", mysql, begins},
		{"COMMIT AND NO CHAIN", mysql, ends},
		{"COMMIT PREPARED 'x'", postgres, noEffect},
		{"PREPARE TRANSACTION 'x'", postgres, ends},
		{"PREPARE s AS SELECT 1", postgres, noEffect},
		{"SELECT 1", mysql, noEffect},
		{"SET autocommit = 0", mysql, unknown},
		{"CREATE TABLE t (a int)", mysql, unknown},
		{"CREATE TABLE t (a int)", postgres, noEffect},
		{"CALL p()", postgres, unknown},
		{"DO $$ BEGIN END $$", postgres, unknown},
		{"CALL p()", generic, unknown},
		{"SAVEPOINT a", postgres, noEffect},
	} {
		stmts, ok := statements(tc.query, tc.server)
		if !ok && tc.want != unknown {
			t.Errorf("statements(%q) not ok", tc.query)
			continue
		}
		got := unknown
		if ok {
			got = effectOf(stmts[0], tc.server)
		}
		if got != tc.want {
			t.Errorf("effectOf(%q, %s) = %d, want %d", tc.query, tc.server, got, tc.want)
		}
	}
}

func TestBeginSQL(t *testing.T) {
	for _, tc := range []struct {
		server   server
		level    sql.IsolationLevel
		readOnly bool
		want     []string // nil: the driver's Begin
		wantErr  bool
	}{
		{server: postgres, want: []string{"BEGIN"}},
		{server: postgres, level: sql.LevelSerializable, readOnly: true, want: []string{"BEGIN ISOLATION LEVEL SERIALIZABLE, READ ONLY"}},
		{server: postgres, readOnly: true, want: []string{"BEGIN READ ONLY"}},
		{server: mysql, want: []string{"START TRANSACTION"}},
		{server: mysql, level: sql.LevelReadCommitted, readOnly: true, want: []string{"SET TRANSACTION ISOLATION LEVEL READ COMMITTED", "START TRANSACTION READ ONLY"}},
		{server: generic, want: nil},
		{server: generic, level: sql.LevelSerializable, wantErr: true},
		{server: generic, readOnly: true, wantErr: true},
		{server: postgres, level: sql.LevelSnapshot, wantErr: true},
		{server: mysql, level: sql.LevelLinearizable, wantErr: true},
	} {
		got, err := tc.server.beginSQL(driver.TxOptions{Isolation: driver.IsolationLevel(tc.level), ReadOnly: tc.readOnly})
		if tc.wantErr {
			if err == nil || !strings.HasPrefix(err.Error(), "pooldriver: odbc:") {
				t.Errorf("beginSQL(%s, %s, %t) = %q, %v; want an error", tc.server, tc.level, tc.readOnly, got, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("beginSQL(%s, %s, %t) = %q, %v; want %q", tc.server, tc.level, tc.readOnly, got, err, tc.want)
		}
	}
}

func TestServerOf(t *testing.T) {
	for name, want := range map[string]server{
		"PostgreSQL Unicode": postgres, "psqlodbcw.so": postgres, "MariaDB Unicode": mysql,
		"libmaodbc.so": mysql, "MySQL ODBC 8.0 Unicode Driver": mysql, "SQLite3": generic, "": generic,
	} {
		if got := serverOf(name); got != want {
			t.Errorf("serverOf(%q) = %s, want %s", name, got, want)
		}
	}
}

// FuzzStatements checks that the lexer never panics and that whatever it
// splits with certainty has a keyword first in every statement.
func FuzzStatements(f *testing.F) {
	for _, q := range []string{"BEGIN; COMMIT", "SELECT 'a\\'; COMMIT'", "/* x */ ROLLBACK TO a", "DO $$ $$", "-- x\n#y\nEND"} {
		f.Add(q, uint8(0))
	}
	f.Fuzz(func(t *testing.T, q string, s uint8) {
		srv := server(s % 3)
		stmts, ok := statements(q, srv)
		if !ok {
			return
		}
		for _, st := range stmts {
			if len(st) == 0 || len(st) > 5 || st[0] == "" {
				t.Fatalf("statements(%q, %s) = %q", q, srv, stmts)
			}
			_ = effectOf(st, srv)
		}
	})
}
