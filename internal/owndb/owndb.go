// Package owndb gives a test binary a database of its own on a server, so
// that packages whose tests create functions, tables or roles, run side by
// side by make test, never judge or read what another package made (a
// user's overload of a built-in in one database makes it a session change
// for every connection to that database).
package owndb

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
)

// Name returns a database name unique to this process and moment.
func Name(prefix string) string {
	return fmt.Sprintf("%s_%d_%d", prefix, os.Getpid(), time.Now().UnixNano()%1_000_000)
}

// Postgres makes database name on the server of dsn (a postgres:// URL)
// and returns dsn naming it and what drops it.
func Postgres(dsn, name string) (own string, drop func(), err error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return "", nil, fmt.Errorf("owndb: want a postgres:// URL to make a database on")
	}
	if drop, err = create("pgx", dsn, name, " WITH (FORCE)"); err != nil {
		return "", nil, err
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

// MySQL makes database name on the server of dsn (go-sql-driver's form)
// and returns dsn naming it and what drops it.
func MySQL(dsn, name string) (own string, drop func(), err error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", nil, fmt.Errorf("owndb: %w", err)
	}
	admin := cfg.Clone()
	admin.DBName = ""
	if drop, err = create("mysql", admin.FormatDSN(), name, ""); err != nil {
		return "", nil, err
	}
	mine := cfg.Clone()
	mine.DBName = name
	return mine.FormatDSN(), drop, nil
}

// create makes the database name through driverName on dsn; the drop it
// returns adds dropSuffix (PostgreSQL's WITH (FORCE) ends the sessions a
// test left open).
func create(driverName, dsn, name, dropSuffix string) (drop func(), err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sql.Open(driverName, dsn)
	if err != nil {
		return nil, err
	}
	defer func() { _ = db.Close() }()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, fmt.Errorf("owndb: making the test binary's database %s: %w", name, err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		db, err := sql.Open(driverName, dsn)
		if err != nil {
			return
		}
		defer func() { _ = db.Close() }()
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+dropSuffix); err != nil && !strings.Contains(err.Error(), "does not exist") {
			fmt.Fprintf(os.Stderr, "owndb: dropping %s: %v\n", name, err)
		}
	}, nil
}
