package postgres

import (
	"strings"
	"testing"

	"github.com/pooldriver/pooldriver/dialects"
)

// TestRoleOf: the role the pool follows comes from target_session_attrs,
// in the DSN or the environment; the values that ask for no writable
// server follow none.
func TestRoleOf(t *testing.T) {
	for attrs, want := range map[string]role{
		"":               roleAny,
		"any":            roleAny,
		"read-write":     roleReadWrite,
		"primary":        rolePrimary,
		"standby":        roleAny,
		"prefer-standby": roleAny,
		"read-only":      roleAny,
	} {
		dsn := "postgres://app@a:5432,b:5432/shop"
		if attrs != "" {
			dsn += "?target_session_attrs=" + attrs
		}
		tmpl, _, err := Dialect.Parse(dsn)
		if err != nil {
			t.Fatalf("%s: %v", dsn, err)
		}
		if got := tmpl.(*template).role; got != want {
			t.Errorf("target_session_attrs=%q: role %d, want %d", attrs, got, want)
		}
	}
	t.Setenv("PGTARGETSESSIONATTRS", "read-write")
	tmpl, _, err := Dialect.Parse("postgres://app@a/shop")
	if err != nil {
		t.Fatal(err)
	}
	if got := tmpl.(*template).role; got != roleReadWrite {
		t.Errorf("PGTARGETSESSIONATTRS=read-write: role %d, want %d", got, roleReadWrite)
	}
}

// TestTargeted: pool_target=primary is target_session_attrs=read-write
// where the DSN names none (and the pool follows the primary: the role is
// read-write); a DSN that asks for a writable server keeps its own; one
// that asks for another kind is refused, its password unquoted.
func TestTargeted(t *testing.T) {
	for _, tc := range []struct {
		dsn  string
		want role
		err  bool
	}{
		{"postgres://app:hunter22@db1,db2/shop", roleReadWrite, false},
		{"postgres://app:hunter22@db1,db2/shop?target_session_attrs=any", roleReadWrite, false},
		{"postgres://app:hunter22@db1,db2/shop?target_session_attrs=read-write", roleReadWrite, false},
		{"postgres://app:hunter22@db1,db2/shop?target_session_attrs=primary", rolePrimary, false},
		{"postgres://app:hunter22@db1,db2/shop?target_session_attrs=standby", 0, true},
		{"postgres://app:hunter22@db1,db2/shop?target_session_attrs=read-only", 0, true},
	} {
		tmpl, _, err := Dialect.Parse(tc.dsn)
		if err != nil {
			t.Fatalf("%s: %v", tc.dsn, err)
		}
		if same, err := tmpl.(*template).Targeted(dialects.TargetAny); err != nil || same != tmpl {
			t.Errorf("%s: Targeted(any) = %v, %v; want the template itself", tc.dsn, same, err)
		}
		got, err := tmpl.(*template).Targeted(dialects.TargetPrimary)
		if tc.err {
			if err == nil || strings.Contains(err.Error(), "hunter22") || !strings.Contains(err.Error(), "target_session_attrs") {
				t.Errorf("%s: %v; want an error naming target_session_attrs, without the password", tc.dsn, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.dsn, err)
		}
		if r := got.(*template).role; r != tc.want || roleOf(got.(*template).cfg.ValidateConnect) != tc.want {
			t.Errorf("%s: role %d, want %d", tc.dsn, r, tc.want)
		}
		if tmpl.(*template).role != roleOf(tmpl.(*template).cfg.ValidateConnect) {
			t.Errorf("%s: Targeted changed the template it was called on", tc.dsn)
		}
	}
}
