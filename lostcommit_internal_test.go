package pooldriver

import "testing"

// TestCommitsAlone: the texts that end a raw transaction by committing it,
// and nothing more, are resolved when their reply is lost; the others
// (another statement, a chain, a prepared transaction's, several
// statements, a comment) are not.
func TestCommitsAlone(t *testing.T) {
	for query, want := range map[string]bool{
		"COMMIT": true, "commit": true, " Commit ; ": true, "END": true, "end work": true,
		"COMMIT TRANSACTION": true, "COMMIT\n\tWORK;": true,
		"": false, ";": false, "ROLLBACK": false, "COMMIT AND CHAIN": false, "COMMIT PREPARED 'x'": false,
		"COMMIT; BEGIN": false, "/* c */ COMMIT": false, "COMMIT -- now": false, "ENDS": false,
		"COMMIT WORK WORK": false, "INSERT INTO t VALUES (1); COMMIT": false,
	} {
		if got := commitsAlone(query); got != want {
			t.Errorf("commitsAlone(%q) = %v, want %v", query, got, want)
		}
	}
}
