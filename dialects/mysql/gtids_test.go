package mysql

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/pooldriver/pooldriver/dialects"
)

// gtidOK is an OK packet whose session state reports the entries given,
// each a type and its data; a sysvar entry is built by sysvar.
func gtidOK(status uint16, entries ...[]byte) []byte {
	p := []byte{0x00, 1, 0}
	p = append(p, le16(status|statusStateChanged)...)
	p = append(p, 0, 0, 0) // warnings, info
	var state []byte
	for _, e := range entries {
		state = append(state, e...)
	}
	p = append(p, lenencOf(uint64(len(state)))...)
	return append(p, state...)
}

// withInfo gives the OK packet p, as gtidOK builds it, an info text.
func withInfo(p []byte, info string) []byte {
	const at = 7 // after the header, two one-byte lengths, the status and the warnings
	out := append([]byte{}, p[:at]...)
	out = append(out, lenencOf(uint64(len(info)))...)
	out = append(out, info...)
	return append(out, p[at+1:]...)
}

// sysvar is a session-state entry reporting a system variable's value.
func sysvar(name, value string) []byte {
	data := append(lenencOf(uint64(len(name))), name...)
	data = append(data, lenencOf(uint64(len(value)))...)
	data = append(data, value...)
	return append(append([]byte{trackSystemVariables}, lenencOf(uint64(len(data)))...), data...)
}

// TestWireReadsGTID: an OK packet whose session state only reports
// last_gtid (MariaDB, session_track_system_variables) tells the commit's
// GTID and is no change of the session; any other report is a change,
// and tells no GTID.
func TestWireReadsGTID(t *testing.T) {
	stateChange := []byte{2, 1, '1'} // SESSION_TRACK_STATE_CHANGE
	for _, tc := range []struct {
		name    string
		ok      []byte
		changed bool
		gtid    gtid
	}{
		{"commit", gtidOK(statusAutocommit, sysvar("last_gtid", "0-1-9")), false, gtid{seq: 9, server: 1, ok: true}},
		{"with info text", withInfo(gtidOK(statusAutocommit, sysvar("last_gtid", "2-3-1000")), "Rows matched: 1  Changed: 1  Warnings: 0"), false,
			gtid{seq: 1000, domain: 2, server: 3, ok: true}},
		{"big numbers", gtidOK(statusAutocommit, sysvar("last_gtid", "4294967295-4294967295-18446744073709551615")), false,
			gtid{seq: 18446744073709551615, domain: 4294967295, server: 4294967295, ok: true}},
		{"another variable", gtidOK(statusAutocommit, sysvar("time_zone", "+01:00")), true, gtid{}},
		{"gtid and a variable", gtidOK(statusAutocommit, sysvar("last_gtid", "0-1-9"), sysvar("autocommit", "OFF")), true, gtid{}},
		{"gtid and a state change", gtidOK(statusAutocommit, sysvar("last_gtid", "0-1-9"), stateChange), true, gtid{}},
		{"state change", gtidOK(statusAutocommit, stateChange), true, gtid{}},
		{"not a gtid", gtidOK(statusAutocommit, sysvar("last_gtid", "0-1")), true, gtid{}},
		{"empty state", gtidOK(statusAutocommit), true, gtid{}},
		{"truncated", gtidOK(statusAutocommit, sysvar("last_gtid", "0-1-9"))[:20], true, gtid{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(mariaCaps, extCacheMetadata)
			b.handshake(serverCaps)
			b.command("COMMIT", wantState{busy: true}, append([]byte{comQuery}, "COMMIT"...))
			want := idle
			want.changed = tc.changed
			b.add(false, "COMMIT ok", want, tc.ok)
			w := play(t, b.c, nil)
			if w.gtid != tc.gtid {
				t.Errorf("gtid = %+v, want %+v", w.gtid, tc.gtid)
			}
		})
	}
}

// TestWireGTIDInLongReply: a report too long for what the wire keeps of a
// packet is a change (it cannot be read).
func TestWireGTIDInLongReply(t *testing.T) {
	b := newBuilder(mariaCaps, extCacheMetadata)
	b.handshake(serverCaps)
	b.command("COMMIT", wantState{busy: true}, append([]byte{comQuery}, "COMMIT"...))
	long := sysvar("last_gtid", "0-1-9")
	b.add(false, "COMMIT ok", changed, gtidOK(statusAutocommit, long, long, long, long, long, long, long, long))
	if w := play(t, b.c, nil); w.gtid.ok {
		t.Errorf("gtid = %+v from a packet the wire kept part of", w.gtid)
	}
}

func TestPositionOf(t *testing.T) {
	for _, tc := range []struct {
		in    string
		want  gtid
		fails bool
	}{
		{"", gtid{}, false},
		{"0-1-42", gtid{seq: 42, server: 1, ok: true}, false},
		{" 3-7-1 ", gtid{seq: 1, domain: 3, server: 7, ok: true}, false},
		{"0-1-42,1-2-5", gtid{}, true},
		{"0-1", gtid{}, true},
		{"0-1-x", gtid{}, true},
		{"0-1-2-3", gtid{}, true},
		{"-1-2", gtid{}, true},
	} {
		got, err := positionOf(tc.in)
		if (err != nil) != tc.fails || got != tc.want {
			t.Errorf("positionOf(%q) = %+v, %v; want %+v, fails %v", tc.in, got, err, tc.want, tc.fails)
		}
	}
}

// TestGTIDDomain: the first domain seen is the DSN's; another is not, for
// every copy of the template.
func TestGTIDDomain(t *testing.T) {
	tmpl, _, err := Dialect.Parse("mysql://app@tcp(db1,db2)/shop")
	if err != nil {
		t.Fatal(err)
	}
	sbs := tmpl.(dialects.StandbyTemplates).Standbys()
	d := tmpl.(*template).domain
	if sbs[0].(*template).domain != d || sbs[1].(*template).domain != d {
		t.Fatal("the replicas' templates do not share the primary's domain")
	}
	if !d.agree(0) {
		t.Error("domain 0, first seen, is not agreed")
	}
	if !d.agree(0) {
		t.Error("domain 0 is not agreed a second time")
	}
	if d.agree(1) {
		t.Error("domain 1 agreed after domain 0")
	}
	var e gtidDomain
	if !e.agree(7) || e.agree(0) {
		t.Error("a domain other than 0 first: not kept")
	}
}

// TestStandbys: a DSN naming several servers gives one replica template
// per server, each for that server alone, read-only, its String without
// the password; a DSN of one server gives none.
func TestStandbys(t *testing.T) {
	tmpl, _, err := Dialect.Parse("mysql://app:pw@tcp(db1:3307,db2)/shop?parseTime=true&pool_target=primary")
	if err != nil {
		t.Fatal(err)
	}
	primary, err := tmpl.(*template).Targeted(dialects.TargetPrimary)
	if err != nil {
		t.Fatal(err)
	}
	sbs := primary.(dialects.StandbyTemplates).Standbys()
	want := []string{"mysql://app:xxxxx@tcp(db1:3307)/shop?parseTime=true", "mysql://app:xxxxx@tcp(db2:3306)/shop?parseTime=true"}
	if len(sbs) != len(want) {
		t.Fatalf("%d standbys, want %d", len(sbs), len(want))
	}
	for i, sb := range sbs {
		s := sb.(*template)
		if s.String() != want[i] || s.hosts != nil || !s.standby || s.target != dialects.TargetAny || s.cfg.Addr != strings.TrimSuffix(strings.TrimPrefix(want[i], "mysql://app:xxxxx@tcp("), ")/shop?parseTime=true") {
			t.Errorf("standby %d: %q, hosts %q, standby %v, target %v, addr %q", i, s.String(), s.hosts, s.standby, s.target, s.cfg.Addr)
		}
		if s.Credentials().Password != "pw" {
			t.Errorf("standby %d lost the DSN's password", i)
		}
	}
	if primary.(*template).standby {
		t.Error("Standbys changed the primary's template")
	}
	one, _, err := Dialect.Parse("mysql://app@tcp(db1)/shop")
	if err != nil {
		t.Fatal(err)
	}
	if sbs := one.(dialects.StandbyTemplates).Standbys(); sbs != nil {
		t.Errorf("a DSN of one server: %d standbys", len(sbs))
	}
}

func TestRefusedByStandby(t *testing.T) {
	var tm template
	for n, want := range map[uint16]bool{1290: true, 1792: true, 1146: true, 1049: true, 1305: true, 1062: false, 1213: false} {
		err := fmt.Errorf("wrapped: %w", &mysql.MySQLError{Number: n, Message: "x"})
		if got := tm.RefusedByStandby(err); got != want {
			t.Errorf("error %d: RefusedByStandby = %v, want %v", n, got, want)
		}
	}
	if tm.RefusedByStandby(errors.New("pooldriver: mysql: connection lost")) {
		t.Error("a connection's error counted as a replica's refusal")
	}
}
