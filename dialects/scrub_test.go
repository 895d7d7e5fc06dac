package dialects

import "testing"

func TestScrub(t *testing.T) {
	for _, c := range []struct {
		msg     string
		secrets []string
		want    string
	}{
		{"login as bob with hunter2 failed", []string{"hunter2"}, "login as bob with xxxxx failed"},
		{"no secret here", []string{"hunter2", ""}, "no secret here"},
		{"pw abc rejected", []string{"abc"}, "(details withheld: they contain a password)"},
		{"a longsecret and long", []string{"longsecret", "long"}, "a xxxxx and xxxxx"},
	} {
		if got := Scrub(c.msg, c.secrets...); got != c.want {
			t.Errorf("Scrub(%q, %q) = %q, want %q", c.msg, c.secrets, got, c.want)
		}
	}
}
