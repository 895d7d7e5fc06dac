package pooldriver

import (
	"testing"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
)

func TestNextShare(t *testing.T) {
	pg := func(limit, connected int64) dialects.ServerLoad {
		return dialects.ServerLoad{Limit: limit, Connected: connected, Refused: -1}
	}
	maria := func(limit, connected int64) dialects.ServerLoad {
		return dialects.ServerLoad{Limit: limit, Connected: connected, Refused: 7}
	}
	idle := func(l dialects.ServerLoad, n int64) dialects.ServerLoad {
		l.Idle = n
		return l
	}
	for _, tc := range []struct {
		name                 string
		share, total, lo, hi int
		load                 dialects.ServerLoad
		othersRefused        bool
		wasFull              bool
		want                 int
	}{
		{"no limit known", 5, 5, 0, 20, dialects.ServerLoad{}, false, false, 20},
		{"room: grows by an eighth", 8, 8, 0, 20, pg(60, 50), false, false, 9},
		{"room: grows by an eighth of a larger share", 16, 16, 0, 20, pg(60, 50), false, false, 18},
		{"room: never above max", 20, 20, 0, 20, pg(60, 10), false, false, 20},
		{"PostgreSQL full, three equal pools: a quarter each", 20, 20, 0, 20, pg(60, 60), false, false, 15},
		{"PostgreSQL full, alone: keeps its share", 20, 60, 0, 60, pg(60, 60), false, false, 20},
		{"PostgreSQL full, five pools of 12: a sixth each", 15, 12, 0, 20, pg(60, 60), false, false, 10},
		{"PostgreSQL full, small: keeps its three", 20, 3, 0, 20, pg(60, 60), false, false, 3},
		{"a pool of one keeps one", 20, 1, 0, 20, pg(60, 60), false, false, 1},
		{"a share above what it holds comes down to it", 20, 8, 0, 20, pg(60, 60), false, false, 6},
		{"never below min", 20, 20, 18, 20, pg(60, 60), false, false, 18},
		{"MariaDB full, nobody else refused: keeps its share", 20, 20, 0, 20, maria(60, 60), false, false, 20},
		{"MariaDB full, someone else refused: fair share", 20, 20, 0, 20, maria(60, 60), true, false, 15},
		{"MariaDB full, alone, someone else refused: a quarter less", 20, 20, 0, 20, maria(20, 20), true, false, 15},
		{"a lower share stays lower", 10, 20, 0, 20, pg(60, 60), false, false, 10},
		{"eight pools of 8 at 60: a ninth", 8, 8, 0, 20, pg(60, 60), false, false, 6},
		{"holds nothing", 20, 0, 0, 20, pg(60, 60), false, false, 20},
		{"a tiny limit, a quarter less", 5, 5, 0, 20, maria(1, 5), true, false, 4},
		{"PostgreSQL full, 50 of 60 idle elsewhere: alone, keeps its ten", 10, 10, 0, 20, idle(pg(60, 60), 50), false, false, 10},
		{"PostgreSQL full, 8 of 12 idle elsewhere: alone, keeps its share", 10, 4, 0, 10, idle(pg(12, 12), 8), false, false, 10},
		{"PostgreSQL full, its own idle too: still alone", 10, 10, 0, 20, idle(pg(60, 60), 55), false, false, 10},
		{"PostgreSQL full, two pools beside 20 idle: a third of the other 40", 20, 20, 0, 20, idle(pg(60, 60), 20), false, false, 15},
		{"PostgreSQL full, two pools of 12 beside 36 idle: a quarter less, toward a third of the other 24", 12, 12, 0, 20, idle(pg(60, 60), 36), false, false, 9},
		{"MariaDB full, 50 idle elsewhere, someone refused: half of the other ten", 10, 10, 0, 20, idle(maria(60, 60), 50), true, false, 8},
		{"MariaDB full, 50 idle elsewhere, nobody refused: keeps its ten", 10, 10, 0, 20, idle(maria(60, 60), 50), false, false, 10},
		{"room just after a full look: left to the others", 8, 8, 0, 20, pg(60, 52), false, true, 8},
		{"room just after a full look, MariaDB: left to the others", 8, 8, 0, 20, maria(60, 52), false, true, 8},
		{"room at a second look in a row: grows", 8, 8, 0, 20, pg(60, 52), false, false, 9},
		{"full after full: shares as ever", 20, 20, 0, 20, pg(60, 60), false, true, 15},
		{"a little room, however many pools it counts: grows", 1, 1, 0, 20, pg(60, 56), false, false, 2},
		{"within a sixteenth of the limit: full, three pools", 20, 20, 0, 20, pg(60, 57), false, false, 15},
		{"within a sixteenth of the limit: no room to grow", 1, 1, 0, 20, pg(60, 59), false, false, 1},
		{"a limit under sixteen: full only at it", 4, 4, 0, 20, pg(10, 9), false, false, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextShare(tc.share, tc.total, tc.lo, tc.hi, tc.load, tc.othersRefused, tc.wasFull); got != tc.want {
				t.Errorf("nextShare(share %d, total %d, min %d, max %d, %+v, othersRefused %v, wasFull %v) = %d, want %d",
					tc.share, tc.total, tc.lo, tc.hi, tc.load, tc.othersRefused, tc.wasFull, got, tc.want)
			}
		})
	}
}

func TestRefusedOthers(t *testing.T) {
	load := func(limit, refused int64) dialects.ServerLoad {
		return dialects.ServerLoad{Limit: limit, Connected: limit, Refused: refused}
	}
	for _, tc := range []struct {
		name            string
		prev, prevLimit int64
		load            dialects.ServerLoad
		mine            int64
		want            bool
	}{
		{"grew by someone else's", 10, 60, load(60, 12), 1, true},
		{"grew by mine only", 10, 60, load(60, 12), 2, false},
		{"did not grow", 10, 60, load(60, 10), 0, false},
		{"no count before", -1, 60, load(60, 12), 0, false},
		{"not counted now (PostgreSQL)", 10, 60, load(60, -1), 0, false},
		{"another limit binds: another counter", 3, 151, load(16, 900), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := refusedOthers(tc.prev, tc.prevLimit, tc.load, tc.mine); got != tc.want {
				t.Errorf("refusedOthers(%d, %d, %+v, %d) = %v, want %v", tc.prev, tc.prevLimit, tc.load, tc.mine, got, tc.want)
			}
		})
	}
}

func TestSharedFull(t *testing.T) {
	for _, tc := range []struct {
		name  string
		load  dialects.ServerLoad
		total int
		want  bool
	}{
		{"full, others connected", dialects.ServerLoad{Limit: 16, Connected: 16, Idle: 6, Refused: -1}, 10, true},
		{"full, this pool alone", dialects.ServerLoad{Limit: 16, Connected: 16, Refused: -1}, 16, false},
		{"room", dialects.ServerLoad{Limit: 16, Connected: 12, Refused: -1}, 6, false},
		{"within a sixteenth of the limit, others connected", dialects.ServerLoad{Limit: 64, Connected: 60, Refused: -1}, 10, true},
		{"no limit known", dialects.ServerLoad{}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sharedFull(tc.load, tc.total); got != tc.want {
				t.Errorf("sharedFull(%+v, %d) = %v, want %v", tc.load, tc.total, got, tc.want)
			}
		})
	}
}

// TestShareTick: the wait between looks is shareInterval, a quarter more
// or less, and not the same each time.
func TestShareTick(t *testing.T) {
	seen := map[time.Duration]bool{}
	for range 100 {
		d := shareTick()
		if d < shareInterval*3/4 || d >= shareInterval*5/4 {
			t.Fatalf("shareTick() = %v, want within a quarter of %v", d, shareInterval)
		}
		seen[d] = true
	}
	if len(seen) < 50 {
		t.Errorf("100 ticks took %d values: not spread", len(seen))
	}
}
