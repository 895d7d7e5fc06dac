package pooldriver

import (
	"errors"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
)

// dsnSettings are the settings a DSN carries.
func dsnSettings() []setting {
	return slices.DeleteFunc(slices.Clone(settings), func(s setting) bool { return s.configOnly })
}

// defaultText is s's default as the docs write it.
func defaultText(s *setting) string {
	if s.words != "" {
		return s.words
	}
	c := defaultConfig(nil)
	return s.format(&c)
}

// TestSettingsTable: the table names every field of Config that holds a
// value, once, with a default of the field's type; the other exported
// fields are the hooks and the like (functions, interfaces, pointers),
// which String and LogValue name in set=.
func TestSettingsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range settings {
		for _, name := range []string{s.key, s.field, s.option} {
			if name != "" && seen[name] {
				t.Errorf("%s twice in the table", name)
			}
			seen[name] = true
		}
		_, ok := reflect.TypeFor[Config]().FieldByName(s.field)
		var c Config
		switch {
		case !ok:
			t.Errorf("%s: no field %s in Config", s.key, s.field)
		case reflect.ValueOf(s.v.addr(&c)).Pointer() != reflect.ValueOf(&c).Elem().FieldByName(s.field).Addr().Pointer():
			t.Errorf("%s: at points elsewhere than Config.%s", s.key, s.field)
		case strings.HasPrefix(s.key, "pool_") == s.configOnly:
			t.Errorf("%s: a DSN's keys, and only they, start with pool_", s.key)
		case !slices.Contains([]string{toPool, toConnections, toConnector, toTasks}, s.goes):
			t.Errorf("%s goes to %q", s.key, s.goes)
		}
		if s.option != "" && s.option != "WithLeakDetection" && s.option != "WithPoolName" && s.option != "With"+s.field {
			t.Errorf("%s: option %s for the field %s", s.key, s.option, s.field)
		}
	}
	var given []string
	for _, g := range (&Config{}).given() {
		given = append(given, g.name)
	}
	var others []string
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Config]()) {
		switch f.Type.Kind() {
		case reflect.Func, reflect.Interface, reflect.Pointer:
			if seen[f.Name] {
				t.Errorf("%s, a %s, in the table of settings", f.Name, f.Type)
			}
			if f.IsExported() {
				others = append(others, f.Name)
			}
		default:
			if f.IsExported() && !seen[f.Name] {
				t.Errorf("Config.%s is not in the table of settings", f.Name)
			}
		}
	}
	if !slices.Equal(given, others) {
		t.Errorf("Config.given names %v, want the fields that hold no setting, in order: %v", given, others)
	}
}

// TestParseAndFormat: each unit a DSN writes, read by a setting of that
// unit and written back, and what a value that is not one says.
func TestParseAndFormat(t *testing.T) {
	for _, tc := range []struct {
		key  string // a setting of the unit
		text string
		err  string // the error, or the value written back
	}{
		{"pool_min_conns", "7", "7"},
		{"pool_min_conns", "ten", "not an integer"},
		{"pool_acquire_timeout", "1500ms", "1.5s"},
		{"pool_acquire_timeout", "90m", "1h30m"},
		{"pool_acquire_timeout", "0", "0"},
		{"pool_acquire_timeout", "30", "not a duration (want e.g. 500ms, 30s, 5m)"},
		{"pool_reset_always", "1", "true"},
		{"pool_reset_always", "maybe", "not a boolean (want true or false)"},
		{"pool_name", "orders", "orders"},
		{"pool_name", "", "must not be empty"},
		{"pool_mode", "session", "session"},
		{"pool_mode", "statement", `unknown mode "statement" (want transaction or session)`},
		{"pool_reads", "selects", "selects"},
		{"pool_server_pooling", "none", "none"},
		{"pool_server_pooling", "statement", `unknown value "statement" (want none, session or transaction)`},
	} {
		s := settingBy(tc.key)
		var c Config
		err := s.v.parseIn(&c, tc.text)
		got := s.format(&c)
		if err != nil {
			got = err.Error()
		}
		if got != tc.err {
			t.Errorf("%s=%q: %q, want %q", tc.key, tc.text, got, tc.err)
		}
	}
}

// TestChecks: each check, at and past its bounds.
func TestChecks(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string // "": none
	}{
		{"nonNegative(0)", nonNegative(0), ""},
		{"nonNegative(-1)", nonNegative(-1), "must not be negative"},
		{"nonNegative(0s)", nonNegative(time.Duration(0)), ""},
		{"nonNegative(-1ns)", nonNegative(-time.Nanosecond), "must not be negative"},
		{"atLeastOne(1)", atLeastOne(1), ""},
		{"atLeastOne(0)", atLeastOne(0), "must be at least 1"},
		{"positive(1ns)", positive(time.Nanosecond), ""},
		{"positive(0s)", positive(0), "must be positive"},
		{"knownMode(session)", knownMode(SessionMode), ""},
		{"knownMode(7)", knownMode(Mode(7)), "unknown mode"},
		{"knownReads(selects)", knownReads(ReadsSelects), ""},
		{"knownReads(5)", knownReads(Reads(5)), "unknown reads"},
	} {
		if (tc.err == nil) != (tc.want == "") || (tc.err != nil && tc.err.Error() != tc.want) {
			t.Errorf("%s = %v, want %q", tc.name, tc.err, tc.want)
		}
	}
}

// optionCases are, for every option of the table, one that sets its field
// to a value other than the default, and one, for a setting with a check,
// that the check refuses, with the DSN's text of the same value ("": a DSN
// cannot write it).
var optionCases = map[string]struct {
	good, bad Option
	badDSN    string
}{
	"WithAcquireTimeout":        {WithAcquireTimeout(time.Second), WithAcquireTimeout(-time.Second), "-1s"},
	"WithConnectTimeout":        {WithConnectTimeout(time.Second), WithConnectTimeout(-time.Second), "-1s"},
	"WithHealthCheckPeriod":     {WithHealthCheckPeriod(0), WithHealthCheckPeriod(-time.Second), "-1s"},
	"WithLeakDetection":         {WithLeakDetection(time.Minute), WithLeakDetection(-time.Second), "-1s"},
	"WithMaxConnIdleTime":       {WithMaxConnIdleTime(time.Minute), WithMaxConnIdleTime(-time.Second), "-1s"},
	"WithMaxConnLifetime":       {WithMaxConnLifetime(time.Minute), WithMaxConnLifetime(-time.Second), "-1s"},
	"WithMaxConnLifetimeJitter": {WithMaxConnLifetimeJitter(time.Second), WithMaxConnLifetimeJitter(-time.Second), "-1s"},
	"WithMaxConns":              {WithMaxConns(3), WithMaxConns(0), "0"},
	"WithMinConns":              {WithMinConns(1), WithMinConns(-1), "-1"},
	"WithMinIdleConns":          {WithMinIdleConns(1), WithMinIdleConns(-1), "-1"},
	"WithMode":                  {WithMode(SessionMode), WithMode(7), ""},
	"WithReads":                 {WithReads(ReadsStandby), WithReads(5), ""},
	"WithTarget":                {WithTarget(dialects.TargetPrimary), WithTarget(7), ""},
	"WithMaxReplicaLag":         {WithMaxReplicaLag(3 * time.Second), WithMaxReplicaLag(0), ""},
	"WithReadWait":              {WithReadWait(0), WithReadWait(-time.Millisecond), "-1ms"},
	"WithPoolName":              {good: WithPoolName("orders")},
	"WithResetAlways":           {good: WithResetAlways(true)},
	"WithTrustFunctions":        {good: WithTrustFunctions(true)},
	"WithCleanupTimeout":        {WithCleanupTimeout(time.Second), WithCleanupTimeout(0), ""},
}

// TestOptionsAreTheTable: every option of the table sets its own field and
// no other; a value its setting's check refuses is refused alike by the
// option, the DSN and NewConnectorWithConfig, each naming it its own way.
func TestOptionsAreTheTable(t *testing.T) {
	def, err := ParseConfig(fakeDSN(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range settings {
		if s.option == "" {
			continue
		}
		tc, ok := optionCases[s.option]
		if !ok {
			t.Errorf("no case for %s", s.option)
			continue
		}
		c := def.Copy()
		if err := tc.good(c); err != nil {
			t.Errorf("%s: %v", s.option, err)
		}
		if a, b := def.String(), c.String(); a == b || strings.ReplaceAll(b, " "+s.key+"="+s.format(c), "") != strings.ReplaceAll(a, " "+s.key+"="+s.format(def), "") {
			t.Errorf("%s changed more or less than %s:\n%s\n%s", s.option, s.key, a, b)
		}
		if (tc.bad == nil) != !s.v.checked() {
			t.Errorf("%s: a bad case for a setting with a check, and only for one", s.option)
			continue
		}
		if tc.bad == nil {
			continue
		}
		c = def.Copy()
		optErr := tc.bad(c)
		want := s.checkIn(c)
		if want == nil || optErr == nil || errors.Unwrap(optErr).Error() != want.Error() || !strings.Contains(optErr.Error(), s.option+"(") {
			t.Errorf("%s: %v, want the check's %v naming the option", s.option, optErr, want)
		}
		if _, err := NewConnectorWithConfig(c); err == nil || errors.Unwrap(err).Error() != want.Error() || !strings.Contains(err.Error(), s.field+" (") {
			t.Errorf("field %s: %v, want the check's %v naming the field", s.field, err, want)
		}
		if tc.badDSN != "" {
			_, err := ParseConfig(fakeDSN(t, s.key+"="+tc.badDSN))
			if err == nil || errors.Unwrap(err).Error() != want.Error() || !strings.Contains(err.Error(), s.key+`="`+tc.badDSN+`"`) {
				t.Errorf("%s=%s: %v, want the check's %v naming the parameter", s.key, tc.badDSN, err, want)
			}
		}
	}
	if len(optionCases) != len(settings)-1 { // pool_server_pooling has no option
		t.Errorf("%d option cases for %d settings", len(optionCases), len(settings))
	}
}

// TestParamsDocumented: the package doc lists every pool_* parameter with
// its Config field and default, and the README's table of settings lists
// every setting, and only them, with its DSN key, Config field, option and
// default, from the table the parser uses. The README's other rows name
// Config fields that are not settings (hooks and the like).
func TestParamsDocumented(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range dsnSettings() {
		line := regexp.MustCompile(`(?m)^//\s+` + p.key + `\s+(\w+)\s+(.*)$`).FindSubmatch(doc)
		if line == nil || string(line[1]) != p.field || string(line[2]) != defaultText(&p) {
			t.Errorf("doc.go: want the line %q %q %q, got %q", p.key, p.field, defaultText(&p), line)
		}
	}

	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := readmeSettings(t, string(readme))
	for i := range settings {
		s := &settings[i]
		key := s.key
		if s.configOnly {
			key = ""
		}
		row, ok := rows[s.field]
		delete(rows, s.field)
		if !ok || row.key != key || row.option != s.option || !strings.Contains(row.def, defaultText(s)) {
			t.Errorf("README.md: want a row %q %q %q with the default %q, got %+v", key, s.field, s.option, defaultText(s), row)
		}
	}
	for field, row := range rows {
		if f, ok := reflect.TypeFor[Config]().FieldByName(field); !ok || !f.IsExported() || row.key != "" {
			t.Errorf("README.md: a row for %s, which is not a setting (%+v)", field, row)
		}
	}
}

// readmeRow is a row of the README's table of settings, for one field.
type readmeRow struct{ key, option, def string }

// readmeSettings reads the README's table of settings (the one headed
// | DSN key | Config field | option | default |), by field: a row naming
// several fields names as many options.
func readmeSettings(t *testing.T, readme string) map[string]readmeRow {
	t.Helper()
	quoted := regexp.MustCompile("`([^`(]+)[^`]*`")
	names := func(cell string) []string {
		var n []string
		for _, m := range quoted.FindAllStringSubmatch(cell, -1) {
			n = append(n, m[1])
		}
		return n
	}
	rows := map[string]readmeRow{}
	in := false
	for _, line := range strings.Split(readme, "\n") {
		cells := strings.Split(line, "|")
		switch {
		case !strings.HasPrefix(line, "|") || len(cells) < 6:
			if in {
				return rows
			}
		case !in:
			head := strings.ToLower(strings.ReplaceAll(strings.Join(cells[2:5], "|"), "`", ""))
			in = regexp.MustCompile(`^\s*config field\s*\|\s*option\s*\|\s*default\s*$`).MatchString(head)
		case strings.HasPrefix(cells[1], "---"):
		default:
			keys, fields, options := names(cells[1]), names(cells[2]), names(cells[3])
			if len(keys) > 1 || len(fields) == 0 || (len(options) != 0 && len(options) != len(fields)) {
				t.Errorf("README.md: a row of settings not read: %s", line)
				continue
			}
			for i, f := range fields {
				r := readmeRow{def: strings.Join(cells[4:len(cells)-1], "|")}
				if len(keys) == 1 {
					r.key = keys[0]
				}
				if len(options) != 0 {
					r.option = options[i]
				}
				if _, dup := rows[f]; dup {
					t.Errorf("README.md: %s in two rows", f)
				}
				rows[f] = r
			}
		}
	}
	if !in {
		t.Fatal("README.md: no table headed | DSN key | Config field | option | default |")
	}
	return rows
}
