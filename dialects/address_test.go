package dialects

import "testing"

func TestAddressString(t *testing.T) {
	for _, tc := range []struct {
		a    Address
		want string
	}{
		{Address{Host: "db", Port: 5432, Database: "shop"}, "db:5432/shop"},
		{Address{Host: "::1", Port: 5432, Database: "shop"}, "[::1]:5432/shop"},
		{Address{Host: "db", Database: "shop"}, "db/shop"},
		{Address{Host: "db", Port: 3306}, "db:3306"},
		{Address{Host: "/var/run/mysqld/mysqld.sock", Database: "shop"}, "/var/run/mysqld/mysqld.sock/shop"},
		{Address{Port: 5432, Database: "shop"}, ""},
		{Address{}, ""},
		{Address{Host: "a", Port: 5432, Database: "shop", Others: []Address{{Host: "b", Port: 5433}, {Host: "::1", Port: 5434}}}, "a:5432,b:5433,[::1]:5434/shop"},
	} {
		if got := tc.a.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.a, got, tc.want)
		}
	}
	if got := Wrap(nil).(AddressedTemplate).Address(); got.String() != "" || got.Others != nil {
		t.Errorf("Wrap: %+v, want none", got)
	}
}
