package postgres

import "testing"

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
