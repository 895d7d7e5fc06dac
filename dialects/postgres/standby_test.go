package postgres

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pooldriver/pooldriver/dialects"
)

// TestStandbys: a DSN of several hosts gives one template per host, in
// the DSN's order, each connecting to its host alone, refusing a primary,
// asking for no writable server; its Address names the host, its String
// is a DSN of that host without the password, which pgx reads back to the
// same host.
func TestStandbys(t *testing.T) {
	for _, tc := range []struct {
		dsn     string
		strings []string // each standby template's String, in order
		addrs   []string // and its Address
	}{
		{
			dsn: "postgres://app:s3cret@a:5432,b:5433/shop?sslmode=disable&target_session_attrs=read-write&application_name=x",
			strings: []string{
				"postgres://app:xxxxx@a:5432/shop?sslmode=disable&application_name=x&target_session_attrs=standby",
				"postgres://app:xxxxx@b:5433/shop?sslmode=disable&application_name=x&target_session_attrs=standby",
			},
			addrs: []string{"a:5432/shop", "b:5433/shop"},
		},
		{
			dsn: "postgresql://app@[::1]:5432,10.0.0.2/shop?password=s3cret&sslmode=disable",
			strings: []string{
				"postgresql://app@[::1]:5432/shop?password=xxxxx&sslmode=disable&target_session_attrs=standby",
				"postgresql://app@10.0.0.2:5432/shop?password=xxxxx&sslmode=disable&target_session_attrs=standby",
			},
			addrs: []string{"[::1]:5432/shop", "10.0.0.2:5432/shop"},
		},
		{
			dsn: "host=a,b port=5432,5433 dbname=shop user=app password='s3 cret' sslmode=disable target_session_attrs=primary",
			strings: []string{
				"dbname=shop user=app password=xxxxx sslmode=disable host=a port=5432 target_session_attrs=standby",
				"dbname=shop user=app password=xxxxx sslmode=disable host=b port=5433 target_session_attrs=standby",
			},
			addrs: []string{"a:5432/shop", "b:5433/shop"},
		},
		{
			dsn: "postgres://app@/shop?host=/var/run/postgresql,db&sslmode=disable",
			strings: []string{
				"postgres://app@/shop?sslmode=disable&host=%2Fvar%2Frun%2Fpostgresql&port=5432&target_session_attrs=standby",
				"postgres://app@db:5432/shop?sslmode=disable&target_session_attrs=standby",
			},
			addrs: []string{"/var/run/postgresql:5432/shop", "db:5432/shop"},
		},
	} {
		tmpl, _, err := Dialect.Parse(tc.dsn)
		if err != nil {
			t.Fatalf("%s: %v", tc.dsn, err)
		}
		sb := tmpl.(dialects.StandbyTemplates).Standbys()
		if len(sb) != len(tc.strings) {
			t.Fatalf("%s: %d standby templates, want %d", tc.dsn, len(sb), len(tc.strings))
		}
		for i, s := range sb {
			st := s.(*template)
			if got := s.String(); got != tc.strings[i] {
				t.Errorf("%s: standby %d: String %q, want %q", tc.dsn, i, got, tc.strings[i])
			}
			if strings.Contains(s.String(), "s3") {
				t.Errorf("%s: standby %d: String shows the password: %s", tc.dsn, i, s.String())
			}
			a := s.(dialects.AddressedTemplate).Address()
			if got := a.String(); got != tc.addrs[i] || len(a.Others) != 0 {
				t.Errorf("%s: standby %d: Address %q (others %v), want %q alone", tc.dsn, i, got, a.Others, tc.addrs[i])
			}
			if st.hosts != nil || st.role != roleAny || st.Standbys() != nil {
				t.Errorf("%s: standby %d: hosts %v, role %d, Standbys %v; want none, roleAny, none", tc.dsn, i, st.hosts, st.role, st.Standbys())
			}
			if v := st.cfg.ValidateConnect; v == nil || reflect.ValueOf(v).Pointer() != reflect.ValueOf(validateStandby).Pointer() {
				t.Errorf("%s: standby %d: the connect check is not validateStandby", tc.dsn, i)
			}
			back, err := pgx.ParseConfig(strings.Replace(s.String(), "xxxxx", "p", 1))
			if err != nil {
				t.Fatalf("%s: standby %d: pgx cannot read String: %v", tc.dsn, i, err)
			}
			if back.Host != st.cfg.Host || back.Port != st.cfg.Port || len(back.Fallbacks) != len(st.cfg.Fallbacks) || roleOf(back.ValidateConnect) != roleAny || back.Database != st.cfg.Database {
				t.Errorf("%s: standby %d: String reads back as %s:%d/%s (%d fallbacks)", tc.dsn, i, back.Host, back.Port, back.Database, len(back.Fallbacks))
			}
		}
	}
}

// TestStandbysOneHost: a DSN of one host, or one host named twice, has no
// standby templates.
func TestStandbysOneHost(t *testing.T) {
	for _, dsn := range []string{
		"postgres://app@a:5432/shop",
		"postgres://app@a:5432,a:5432/shop",
		"host=db dbname=shop",
	} {
		tmpl, _, err := Dialect.Parse(dsn)
		if err != nil {
			t.Fatalf("%s: %v", dsn, err)
		}
		if sb := tmpl.(dialects.StandbyTemplates).Standbys(); sb != nil {
			t.Errorf("%s: %d standby templates, want nil", dsn, len(sb))
		}
	}
}

// TestStandbysTLS: each host's template keeps that host's entries, in
// pgx's order, with their TLS configuration: sslmode=prefer tries TLS,
// then plain; verify-full checks the certificate against that host's name.
func TestStandbysTLS(t *testing.T) {
	tmpl, _, err := Dialect.Parse("postgres://app@a:5432,b:5433/shop?sslmode=prefer")
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range tmpl.(dialects.StandbyTemplates).Standbys() {
		cfg := s.(*template).cfg
		host := []string{"a", "b"}[i]
		if cfg.Host != host || cfg.TLSConfig == nil || len(cfg.Fallbacks) != 1 ||
			cfg.Fallbacks[0].Host != host || cfg.Fallbacks[0].Port != cfg.Port || cfg.Fallbacks[0].TLSConfig != nil {
			t.Errorf("prefer: standby %d: %s:%d TLS %v, fallbacks %+v; want %s with TLS, then without", i, cfg.Host, cfg.Port, cfg.TLSConfig != nil, cfg.Fallbacks, host)
		}
	}

	tmpl, _, err = Dialect.Parse("postgres://app@a:5432,b:5433/shop?sslmode=verify-full")
	if err != nil {
		t.Fatal(err)
	}
	orig := tmpl.(*template).cfg
	for i, s := range tmpl.(dialects.StandbyTemplates).Standbys() {
		cfg := s.(*template).cfg
		host := []string{"a", "b"}[i]
		if cfg.Host != host || cfg.TLSConfig == nil || cfg.TLSConfig.ServerName != host || len(cfg.Fallbacks) != 0 {
			t.Errorf("verify-full: standby %d: %s, server name %q, %d fallbacks; want %s alone", i, cfg.Host, cfg.TLSConfig.ServerName, len(cfg.Fallbacks), host)
		}
		if cfg.TLSConfig == orig.TLSConfig || len(orig.Fallbacks) > 0 && cfg.TLSConfig == orig.Fallbacks[0].TLSConfig {
			t.Errorf("verify-full: standby %d shares the template's TLS configuration", i)
		}
	}
}

// TestValidateStandby: a primary's refusal matches dialects.ErrNotStandby
// and pgx's own error.
func TestValidateStandby(t *testing.T) {
	if !errors.Is(errPrimary, dialects.ErrNotStandby) || !errors.Is(errPrimary, pgconn.ErrPrimaryConnection) {
		t.Fatalf("%v matches neither", errPrimary)
	}
}
