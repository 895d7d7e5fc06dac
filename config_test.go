package pooldriver

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/fakedb"
)

// A value other than the default for every pool_* parameter, and what
// Config.String writes for it.
var paramSamples = map[string][2]string{
	"pool_acquire_timeout":          {"1500ms", "1.5s"},
	"pool_connect_timeout":          {"2s", "2s"},
	"pool_health_check_period":      {"0", "0"},
	"pool_leak_detection_threshold": {"90s", "1m30s"},
	"pool_max_conn_idle_time":       {"2h", "2h"},
	"pool_max_conn_lifetime":        {"45m", "45m"},
	"pool_max_conn_lifetime_jitter": {"3m", "3m"},
	"pool_max_conns":                {"7", "7"},
	"pool_min_conns":                {"2", "2"},
	"pool_min_idle_conns":           {"1", "1"},
	"pool_mode":                     {"session", "session"},
	"pool_reads":                    {"standby", "standby"},
	"pool_max_replica_lag":          {"250ms", "250ms"},
	"pool_read_wait":                {"20ms", "20ms"},
	"pool_name":                     {"orders", "orders"},
	"pool_reset_always":             {"1", "true"},
	"pool_trust_functions":          {"1", "true"},
	"pool_server_pooling":           {"none", "none"},
	"pool_target":                   {"primary", "primary"},
}

func fakeDSN(t *testing.T, query string) string {
	t.Helper()
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	srv := fakedb.NewServer(name)
	t.Cleanup(srv.Close)
	dsn := "fake://app:s3cret@" + name
	if query != "" {
		dsn += "?" + query
	}
	return dsn
}

// poolParams returns the pool_* settings Config.String wrote, as a DSN's
// query.
func poolParams(s string) string {
	var kv []string
	for _, f := range strings.Fields(s) {
		if strings.HasPrefix(f, "pool_") {
			kv = append(kv, f)
		}
	}
	return strings.Join(kv, "&")
}

// TestConfigParamsRoundTrip: every pool_* parameter, given a value other
// than its default, reaches its Config field, is written back by String
// in the DSN's own form, and parses again to the same Config: DSN → Config
// → DSN. The table of parameters and the samples name the same keys.
func TestConfigParamsRoundTrip(t *testing.T) {
	if len(paramSamples) != len(dsnSettings()) {
		t.Fatalf("%d samples for %d parameters", len(paramSamples), len(dsnSettings()))
	}
	var query []string
	for _, p := range dsnSettings() {
		s, ok := paramSamples[p.key]
		if !ok {
			t.Fatalf("no sample for %s", p.key)
		}
		query = append(query, p.key+"="+s[0])
	}
	dsn := fakeDSN(t, strings.Join(query, "&"))
	cfg, err := ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		MaxConns: 7, MinConns: 2, MinIdleConns: 1, AcquireTimeout: 1500 * time.Millisecond,
		ConnectTimeout: 2 * time.Second, HealthCheckPeriod: 0, MaxConnLifetime: 45 * time.Minute,
		MaxConnLifetimeJitter: 3 * time.Minute, MaxConnIdleTime: 2 * time.Hour,
		LeakDetectionThreshold: 90 * time.Second, CleanupTimeout: defaultCleanupTimeout, Mode: SessionMode,
		ServerPooling: dialects.ServerPoolingNone, Target: dialects.TargetPrimary, ResetAlways: true, TrustFunctions: true, Name: "orders",
		Reads: ReadsStandby, MaxReplicaLag: 250 * time.Millisecond, ReadWait: 20 * time.Millisecond,
	}
	if got := *cfg; got.tmpl == nil || !sameSettings(got, want) {
		t.Fatalf("ParseConfig:\n got %+v\nwant %+v", got, want)
	}
	s := cfg.String()
	for _, p := range dsnSettings() {
		if kv := p.key + "=" + paramSamples[p.key][1]; !strings.Contains(s, " "+kv) {
			t.Errorf("String() lacks %s: %s", kv, s)
		}
	}
	if strings.Contains(s, "s3cret") {
		t.Fatalf("String() shows the password: %s", s)
	}
	again, err := ParseConfig(fakeDSN(t, poolParams(s)))
	if err != nil {
		t.Fatalf("ParseConfig(String()): %v", err)
	}
	if !sameSettings(*again, *cfg) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", *again, *cfg)
	}

	// The defaults: a DSN without parameters, written back with every
	// parameter, parses to the same.
	def, err := ParseConfig(fakeDSN(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	again, err = ParseConfig(fakeDSN(t, poolParams(def.String())))
	if err != nil {
		t.Fatalf("ParseConfig(defaults' String()): %v", err)
	}
	if !sameSettings(*again, *def) || def.MaxConns != defaultMaxConns || def.MaxConnLifetimeJitter != defaultMaxConnLifetime/10 {
		t.Fatalf("defaults round trip:\n got %+v\nwant %+v", *again, *def)
	}
}

// sameSettings compares the settings of two Configs (not their template,
// nor the functions).
func sameSettings(a, b Config) bool {
	a.tmpl, b.tmpl = nil, nil
	a.jitterGiven, b.jitterGiven = false, false
	return a.String() == b.String() && a.MaxConns == b.MaxConns && a.MinConns == b.MinConns &&
		a.MinIdleConns == b.MinIdleConns && a.AcquireTimeout == b.AcquireTimeout &&
		a.ConnectTimeout == b.ConnectTimeout && a.HealthCheckPeriod == b.HealthCheckPeriod &&
		a.MaxConnLifetime == b.MaxConnLifetime && a.MaxConnLifetimeJitter == b.MaxConnLifetimeJitter &&
		a.MaxConnIdleTime == b.MaxConnIdleTime && a.LeakDetectionThreshold == b.LeakDetectionThreshold &&
		a.CleanupTimeout == b.CleanupTimeout && a.Mode == b.Mode && a.ServerPooling == b.ServerPooling &&
		a.ResetAlways == b.ResetAlways && a.TrustFunctions == b.TrustFunctions && a.Name == b.Name &&
		a.Reads == b.Reads && a.MaxReplicaLag == b.MaxReplicaLag && a.ReadWait == b.ReadWait && a.Target == b.Target
}

// TestConfigParamErrors: a bad value of every parameter is an error that
// names the parameter and the value; an unknown parameter names every
// known one. None shows the password.
func TestConfigParamErrors(t *testing.T) {
	bad := map[string]string{
		"pool_acquire_timeout": "soon", "pool_connect_timeout": "-1s", "pool_health_check_period": "1x",
		"pool_leak_detection_threshold": "-5m", "pool_max_conn_idle_time": "1", "pool_max_conn_lifetime": "forever",
		"pool_max_conn_lifetime_jitter": "-1m", "pool_max_conns": "0", "pool_min_conns": "-1", "pool_min_idle_conns": "two",
		"pool_mode": "statement", "pool_name": "", "pool_reset_always": "maybe", "pool_server_pooling": "statement",
		"pool_trust_functions": "yes please",
		"pool_reads":           "replica", "pool_max_replica_lag": "0s", "pool_target": "leader",
		"pool_read_wait": "-1ms",
	}
	for _, p := range dsnSettings() {
		v, ok := bad[p.key]
		if !ok {
			t.Fatalf("no bad value for %s", p.key)
		}
		_, err := ParseConfig(fakeDSN(t, p.key+"="+v))
		if err == nil || !strings.Contains(err.Error(), p.key) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s=%q: %v", p.key, v, err)
		}
	}
	_, err := ParseConfig(fakeDSN(t, "pool_max_con=3"))
	if err == nil || !strings.Contains(err.Error(), "pool_max_con") || !strings.Contains(err.Error(), paramKeys()) {
		t.Errorf("unknown parameter: %v", err)
	}
}

// TestParseConfigMinAboveMax: a DSN whose minimum of connections is above
// its maximum (given, or the default) is refused by ParseConfig, with an
// error naming both and their values.
func TestParseConfigMinAboveMax(t *testing.T) {
	base := fakeDSN(t, "")
	for params, want := range map[string][]string{
		"pool_min_conns=5&pool_max_conns=4":      {"pool_min_conns", "(5)", "pool_max_conns", "(4)"},
		"pool_min_conns=20":                      {"pool_min_conns", "(20)", "pool_max_conns", "(10)"},
		"pool_min_idle_conns=5&pool_max_conns=4": {"pool_min_idle_conns", "(5)", "pool_max_conns", "(4)"},
	} {
		_, err := ParseConfig(base + "?" + params)
		if err == nil {
			t.Errorf("%s: no error", params)
			continue
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not name %s", params, err, w)
			}
		}
	}
}

// TestNewConnectorWithConfig: the Config's fields are the settings; what
// only the settings together can get wrong is reported by
// NewConnectorWithConfig, naming them; the Connector keeps its own copy,
// which Config reads back; a Config not made by ParseConfig is refused.
func TestNewConnectorWithConfig(t *testing.T) {
	cfg, err := ParseConfig(fakeDSN(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MinConns = 20
	if _, err := NewConnectorWithConfig(cfg); err == nil || !strings.Contains(err.Error(), "pool_min_conns") || !strings.Contains(err.Error(), "pool_max_conns") {
		t.Fatalf("min above max: %v", err)
	}
	cfg.MaxConns = 30
	cfg.AfterRelease = func(any) bool { return true }
	c, err := NewConnectorWithConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg.MaxConns = 1 // the Connector's copy is not changed
	got := c.Config()
	if got.MaxConns != 30 || got.MinConns != 20 || got.AfterRelease == nil || c.Stats().MaxConns != 30 {
		t.Fatalf("read back %+v, stats %+v", got, c.Stats())
	}
	got.MaxConns = 2
	if c.Config().MaxConns != 30 {
		t.Fatal("Config() returned the Connector's own")
	}
	cfg = c.Config()
	for _, bad := range []struct {
		name string
		cfg  *Config
		want string
	}{
		{"nil", nil, "ParseConfig"},
		{"zero", &Config{}, "ParseConfig"},
		{"max", func() *Config { c := cfg.Copy(); c.MaxConns = 0; return c }(), "MaxConns"},
		{"cleanup", func() *Config { c := cfg.Copy(); c.CleanupTimeout = 0; return c }(), "CleanupTimeout"},
		{"lifetime", func() *Config { c := cfg.Copy(); c.MaxConnLifetime = -time.Second; return c }(), "pool_max_conn_lifetime"},
		{"mode", func() *Config { c := cfg.Copy(); c.Mode = 7; return c }(), "Mode"},
	} {
		if _, err := NewConnectorWithConfig(bad.cfg); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want an error naming %s", bad.name, err, bad.want)
		}
	}
}

// TestConfigOptionsOverDSN: options set the Config's fields over the DSN's
// parameters, as Connector.Config shows; the lifetime jitter follows the
// lifetime unless it was given.
func TestConfigOptionsOverDSN(t *testing.T) {
	c := New(fakeDSN(t, "pool_max_conns=3&pool_max_conn_lifetime=10m"), WithMaxConns(5), WithMode(SessionMode), WithMaxConnLifetime(20*time.Minute))
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := c.Config()
	if got.MaxConns != 5 || got.Mode != SessionMode || got.MaxConnLifetime != 20*time.Minute || got.MaxConnLifetimeJitter != 2*time.Minute {
		t.Fatalf("%+v", got)
	}
	c2 := New(fakeDSN(t, "pool_max_conn_lifetime_jitter=1s"), WithMaxConnLifetime(20*time.Minute))
	if err := c2.Err(); err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if j := c2.Config().MaxConnLifetimeJitter; j != time.Second {
		t.Fatalf("given jitter changed to %v", j)
	}
	if bad := New("nope://x"); bad.Config() != nil {
		t.Fatal("a Connector whose configuration failed has a Config")
	}
}

// TestConfigLoggedAtOpen: the Connector logs its Config once, at INFO, as
// attributes, without the password; String names what only a Config sets.
func TestConfigLoggedAtOpen(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c := New(fakeDSN(t, "pool_max_conns=4"), WithLogger(logger), WithCredentials(func(context.Context) (string, string, error) {
		return "app", "other-s3cret", nil
	}))
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out := buf.String()
	if n := strings.Count(out, "pool opened"); n != 1 {
		t.Fatalf("%d lines saying the pool opened:\n%s", n, out)
	}
	for _, want := range []string{"level=INFO", "config.pool_max_conns=4", "config.pool_mode=transaction", "config.dsn=", "config.set=Credentials,Logger"} {
		if !strings.Contains(out, want) {
			t.Errorf("the line lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "s3cret") {
		t.Fatalf("the password is logged:\n%s", out)
	}
	if s := c.Config().String(); !strings.HasSuffix(s, "set=Credentials,Logger") {
		t.Fatalf("String: %s", s)
	}
}

// TestTargetNeedsADialectThatTells: pool_target=primary (or WithTarget) on
// a dialect that cannot tell which server takes writes is an error at New
// that names the setting and no password; pool_target=any is accepted
// everywhere.
func TestTargetNeedsADialectThatTells(t *testing.T) {
	for _, c := range []*Connector{
		New(fakeDSN(t, "pool_target=primary")),
		New(fakeDSN(t, ""), WithTarget(dialects.TargetPrimary)),
	} {
		if err := c.Err(); err == nil || !strings.Contains(err.Error(), "pool_target=primary") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Err() = %v; want one naming pool_target=primary, without the password", err)
		}
	}
	c := New(fakeDSN(t, "pool_target=any"))
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
}
