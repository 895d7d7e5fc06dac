package pooldriver_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/internal/fakedb"
)

func TestSmoke(t *testing.T) {
	srv := fakedb.NewServer(t.Name())
	defer srv.Close()
	c, err := pooldriver.NewConnector("fake://" + t.Name() + "?pool_max_conns=2")
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	defer db.Close()
	var id int64
	if err := db.QueryRow("CONNID").Scan(&id); err != nil {
		t.Fatal(err)
	}
	ctx, end := pooldriver.WithTask(context.Background())
	if _, err := db.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT t 1"); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := db.QueryRow("COUNT t").Scan(&n); err != nil || n != 0 {
		t.Fatal(n, err)
	}
	end()
	if err := db.QueryRow("COUNT t").Scan(&n); err != nil || n != 0 {
		t.Fatal(n, err)
	}
	t.Logf("%+v %+v", c.Stats(), srv.Stats())
}
