package sqllex

import "testing"

func TestTxEffectOf(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  TxEffect // for Any
	}{
		{"", TxNone},
		{"SELECT 1", TxNone},
		{"  \n\tselect * from t where a = 'BEGIN'", TxNone},
		{"INSERT INTO t VALUES (1)", TxNone},
		{"BEGIN", TxBegins},
		{"begin work", TxBegins},
		{"BEGIN TRANSACTION ISOLATION LEVEL SERIALIZABLE", TxBegins},
		{"BEGIN TRAN", TxBegins},
		{"START TRANSACTION READ ONLY", TxBegins},
		{"START SLAVE", TxNone},
		{"COMMIT", TxEnds},
		{"commit work", TxEnds},
		{"END", TxEnds},
		{"END TRANSACTION", TxEnds},
		{"ROLLBACK", TxEnds},
		{"ROLLBACK WORK", TxEnds},
		{"ABORT", TxEnds},
		{"ROLLBACK TO SAVEPOINT a", TxNone},
		{"ROLLBACK TO a", TxNone},
		{"rollback work to savepoint a", TxNone},
		{"ROLLBACK TRANSACTION TO SAVEPOINT a", TxNone},
		{"ROLLBACK TRAN sp1", TxUnknown}, // SQL Server: a savepoint or the transaction
		{"COMMIT AND CHAIN", TxBegins},
		{"COMMIT WORK AND CHAIN", TxBegins},
		{"COMMIT AND NO CHAIN", TxEnds},
		{"COMMIT WORK AND NO CHAIN", TxEnds},
		{"ROLLBACK AND CHAIN", TxBegins},
		{"COMMIT RELEASE", TxUnknown},
		{"COMMIT PREPARED 'x'", TxNone},
		{"ROLLBACK PREPARED 'x'", TxNone},
		{"PREPARE TRANSACTION 'x'", TxEnds},
		{"PREPARE s AS SELECT 1", TxNone},
		{"SAVEPOINT a", TxBegins}, // SQLite: outside a transaction it opens one
		{"savepoint \"a b\"", TxBegins},
		{"SAVEPOINT a; INSERT INTO t VALUES (1); RELEASE a", TxBegins}, // RELEASE may or may not commit
		{"RELEASE SAVEPOINT a", TxNone},                                // the belief stays as it was
		{"RELEASE a", TxNone},
		{"SET TRANSACTION READ ONLY", TxUnknown}, // Oracle: opens one
		{"SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", TxUnknown},
		{"SET autocommit = 0", TxUnknown},
		{"SET @@session.autocommit = 1", TxUnknown},
		{"SET IMPLICIT_TRANSACTIONS ON", TxUnknown},
		{"SET search_path = a", TxNone},
		{"CALL p()", TxUnknown},
		{"XA START 'x'", TxUnknown},
		{"-- c\nBEGIN", TxBegins},
		{"/* c */ COMMIT", TxEnds},
		{"# c\nCOMMIT", TxUnknown}, // MySQL: a comment; PostgreSQL: an operator, no COMMIT
		{"BEGIN; INSERT INTO t VALUES (1)", TxBegins},
		{"BEGIN; INSERT INTO t VALUES (1); COMMIT", TxUnknown}, // an error may have stopped it before COMMIT
		{"COMMIT; BEGIN", TxBegins},
		{"SELECT 1; SELECT 2", TxNone},
		{"SELECT ';'; BEGIN", TxBegins},
		{"SELECT 'x;y'", TxNone},
		{"SELECT $$; BEGIN $$", TxUnknown}, // MySQL: ; BEGIN is a statement
		{"SELECT 'unterminated; BEGIN", TxUnknown},
		{"/*!40101 BEGIN */", TxUnknown},
		{"SELECT 'a\\'; BEGIN; --'", TxUnknown}, // depends on the backslash setting
		{"(SELECT 1)", TxNone},
		{";;", TxNone},

		// Several statements, one of which no rule classifies: a
		// transaction may be open.
		{"SELECT 1; IF @x = 1 BEGIN TRAN", TxUnknown},
		{"INSERT INTO t VALUES (1); EXEC p", TxUnknown},
		{"EXECUTE p; SELECT 1", TxUnknown},
		{"(SELECT 1); SELECT 2", TxUnknown},
		{"SELECT 1; \"x\"", TxUnknown},
		{"WHILE 1 = 1 SELECT 1; SELECT 2", TxUnknown},
		{"SELECT 1; frobnicate", TxUnknown},
		{"SELECT 1; SELECT 2; EXEC p; SELECT 3", TxUnknown},
		{"SELECT 1; SELECT 2; (SELECT 3)", TxUnknown},
		{"DECLARE @x int; SELECT @x = 1; UPDATE t SET a = @x", TxNone},
		{"CREATE TABLE t (a int); INSERT INTO t VALUES (1); select * from t;", TxNone},
		{"PRAGMA foreign_keys = ON; DELETE FROM t; VACUUM", TxNone},
		{"WITH a AS (SELECT 1) SELECT * FROM a; VALUES (1); TABLE t", TxNone},
		{"SELECT 1;;  ;", TxNone},
		{"EXEC p", TxNone}, // one statement: only the words of transaction statements count
		{"IF @x = 1 BEGIN TRAN", TxNone},
	} {
		if got := TxEffectOf(tc.query, Any); got != tc.want {
			t.Errorf("TxEffectOf(%q, Any) = %v, want %v", tc.query, got, tc.want)
		}
	}
}

func TestTxEffectOfFlavors(t *testing.T) {
	for _, tc := range []struct {
		query string
		f     Flavor
		want  TxEffect
	}{
		{"SELECT $$; BEGIN $$", Postgres, TxNone},
		{"SELECT $$; BEGIN $$", MySQL, TxBegins},
		{"# c\nCOMMIT", MySQL, TxEnds},
		{"SELECT 'a\\'; BEGIN; --'", Postgres, TxUnknown},
		{"SELECT E'a\\'; BEGIN; --'", Postgres, TxNone},
		{"SAVEPOINT a", Postgres, TxNone}, // an error outside a transaction
		{"SAVEPOINT a", MySQL, TxNone},    // autocommit: gone at once
		{"SET TRANSACTION READ ONLY", Postgres, TxNone},
		{"SET TRANSACTION READ ONLY", MySQL, TxNone},
		{"SELECT 1; EXEC p", Postgres, TxNone},
		{"SELECT 1; EXEC p", MySQL, TxNone},
	} {
		if got := TxEffectOf(tc.query, tc.f); got != tc.want {
			t.Errorf("TxEffectOf(%q, %d) = %v, want %v", tc.query, tc.f, got, tc.want)
		}
	}
}

func FuzzTxEffectOf(f *testing.F) {
	f.Add("BEGIN; COMMIT")
	f.Add("SELECT $$;$$")
	f.Fuzz(func(t *testing.T, q string) {
		for _, fl := range []Flavor{Postgres, MySQL, Any} {
			e := TxEffectOf(q, fl)
			if e > TxUnknown {
				t.Fatalf("TxEffectOf(%q) = %d", q, e)
			}
			if plainStatement(q) && fl != MySQL {
				// The shortcut must agree with the lexer.
				if full := txEffectTwice(q, false, fl); full != TxNone && full != TxUnknown {
					t.Fatalf("TxEffectOf(%q): shortcut says none, lexer %d", q, full)
				}
			}
		}
	})
}
