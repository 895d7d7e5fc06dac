package postgres

import (
	"database/sql/driver"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pooldriver/pooldriver/dialects"
)

// TestBehindPooler: what each pool_server_pooling value does to the
// template, for DSNs with and without an exec mode of their own, in both
// DSN forms.
func TestBehindPooler(t *testing.T) {
	for _, tc := range []struct {
		dsn     string
		pooling dialects.ServerPooling
		mode    pgx.QueryExecMode // wanted, when no error
		unnamed bool
		check   bool
		errHas  []string
	}{
		{dsn: "postgres://u@db/app", pooling: dialects.ServerPoolingUnset, mode: pgx.QueryExecModeCacheStatement, check: true},
		{dsn: "postgres://u@db/app", pooling: dialects.ServerPoolingNone, mode: pgx.QueryExecModeCacheStatement},
		{dsn: "postgres://u@db/app", pooling: dialects.ServerPoolingSession, mode: pgx.QueryExecModeCacheStatement},
		{dsn: "postgres://u@db/app", pooling: dialects.ServerPoolingTransaction, mode: pgx.QueryExecModeCacheDescribe, unnamed: true},
		{dsn: "host=db user=u", pooling: dialects.ServerPoolingTransaction, mode: pgx.QueryExecModeCacheDescribe, unnamed: true},
		{dsn: "postgres://u@db/app?default_query_exec_mode=exec", pooling: dialects.ServerPoolingTransaction, mode: pgx.QueryExecModeExec, unnamed: true},
		{dsn: "host=db default_query_exec_mode=simple_protocol", pooling: dialects.ServerPoolingTransaction, mode: pgx.QueryExecModeSimpleProtocol, unnamed: true},
		{dsn: "postgres://u@db/app?default_query_exec_mode=cache_describe", pooling: dialects.ServerPoolingTransaction, mode: pgx.QueryExecModeCacheDescribe, unnamed: true},
		{dsn: "postgres://u@db/app?default_query_exec_mode=cache_statement", pooling: dialects.ServerPoolingSession, mode: pgx.QueryExecModeCacheStatement},
		{
			dsn: "postgres://u:secret99@db/app?default_query_exec_mode=cache_statement", pooling: dialects.ServerPoolingTransaction,
			errHas: []string{"default_query_exec_mode=cache_statement", "pool_server_pooling=transaction"},
		},
		{
			dsn: "host=db password=secret99 default_query_exec_mode=describe_exec", pooling: dialects.ServerPoolingTransaction,
			errHas: []string{"default_query_exec_mode=describe_exec", "pool_server_pooling=transaction"},
		},
	} {
		tmpl, _, err := Dialect.Parse(tc.dsn)
		if err != nil {
			t.Fatalf("%s: %v", tc.dsn, err)
		}
		got, err := tmpl.(dialects.PoolerTemplate).BehindPooler(tc.pooling)
		if tc.errHas != nil {
			if err == nil {
				t.Errorf("%s, %v: no error", tc.dsn, tc.pooling)
				continue
			}
			for _, want := range tc.errHas {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s, %v: error %q does not name %q", tc.dsn, tc.pooling, err, want)
				}
			}
			if strings.Contains(err.Error(), "secret99") {
				t.Errorf("the error shows the password: %v", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s, %v: %v", tc.dsn, tc.pooling, err)
			continue
		}
		g := got.(*template)
		if g.cfg.DefaultQueryExecMode != tc.mode || g.unnamed != tc.unnamed || g.checkPooler != tc.check {
			t.Errorf("%s, %v: mode %v unnamed %v check %v; want %v %v %v", tc.dsn, tc.pooling,
				g.cfg.DefaultQueryExecMode, g.unnamed, g.checkPooler, tc.mode, tc.unnamed, tc.check)
		}
		// The parsed template is shared: it must not change.
		if orig := tmpl.(*template); orig.unnamed || orig.checkPooler || orig.cfg == g.cfg && tc.pooling == dialects.ServerPoolingTransaction {
			t.Errorf("%s, %v: BehindPooler changed the template it was called on", tc.dsn, tc.pooling)
		}
	}
}

// TestUnnamedPrepare: behind a transaction pooler a prepared statement
// leaves no named statement on the server and runs on the connection.
func TestUnnamedPrepare(t *testing.T) {
	tmpl, _, err := Dialect.Parse(serverDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	behind, err := tmpl.(dialects.PoolerTemplate).BehindPooler(dialects.ServerPoolingTransaction)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := behind.Open(t.Context(), behind.Credentials())
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	c := dc.(*conn)
	s, err := c.PrepareContext(t.Context(), "SELECT $1::int * 2, $2::text")
	if err != nil {
		t.Fatal(err)
	}
	if n := s.NumInput(); n != 2 {
		t.Errorf("NumInput = %d, want 2", n)
	}
	rows, err := s.(*unnamedStmt).QueryContext(t.Context(), []driver.NamedValue{{Ordinal: 1, Value: 21}, {Ordinal: 2, Value: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	dest := make([]driver.Value, 2)
	if err := rows.Next(dest); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if dest[0] != int64(42) || dest[1] != "x" {
		t.Errorf("got %v", dest)
	}
	var named int
	if err := c.pgx().QueryRow(t.Context(), "SELECT count(*) FROM pg_prepared_statements").Scan(&named); err != nil {
		t.Fatal(err)
	}
	if named != 0 {
		t.Errorf("%d named statements on the server", named)
	}
	if _, err := c.PrepareContext(t.Context(), "SELECT nosuchcolumn"); err == nil || !strings.Contains(err.Error(), "nosuchcolumn") {
		t.Errorf("preparing a bad statement: %v", err)
	}
}
