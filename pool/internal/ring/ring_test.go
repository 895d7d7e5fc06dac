package ring

import (
	"math/rand/v2"
	"testing"
)

func TestRingGrowsFromEight(t *testing.T) {
	var r Ring[int]
	if r.Cap() != 0 {
		t.Fatalf("zero ring has cap %d", r.Cap())
	}
	r.PushBack(1)
	if r.Cap() != 8 {
		t.Fatalf("first push: cap %d, want 8", r.Cap())
	}
	for i := 2; i <= 9; i++ {
		r.PushBack(i)
	}
	if r.Cap() != 16 || r.Len() != 9 {
		t.Fatalf("after 9 pushes: cap %d len %d, want 16 and 9", r.Cap(), r.Len())
	}
	for i := 1; i <= 9; i++ {
		if v, ok := r.PopFront(); !ok || v != i {
			t.Fatalf("PopFront = %d, %v; want %d", v, ok, i)
		}
	}
	if _, ok := r.PopFront(); ok {
		t.Fatal("PopFront on empty ring succeeded")
	}
	if _, ok := r.PopBack(); ok {
		t.Fatal("PopBack on empty ring succeeded")
	}
}

// TestRingAgainstSlice drives the ring and a plain slice with the same random
// operations, across wrap-arounds and growth, and compares them.
func TestRingAgainstSlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var r Ring[int]
	var model []int
	for step := 0; step < 100000; step++ {
		switch op := rng.IntN(10); {
		case op < 3:
			r.PushBack(step)
			model = append(model, step)
		case op < 4:
			r.PushFront(step)
			model = append([]int{step}, model...)
		case op < 6:
			v, ok := r.PopBack()
			if ok != (len(model) > 0) {
				t.Fatalf("step %d: PopBack ok=%v with model len %d", step, ok, len(model))
			}
			if ok {
				if want := model[len(model)-1]; v != want {
					t.Fatalf("step %d: PopBack = %d, want %d", step, v, want)
				}
				model = model[:len(model)-1]
			}
		case op < 9:
			v, ok := r.PopFront()
			if ok != (len(model) > 0) {
				t.Fatalf("step %d: PopFront ok=%v with model len %d", step, ok, len(model))
			}
			if ok {
				if v != model[0] {
					t.Fatalf("step %d: PopFront = %d, want %d", step, v, model[0])
				}
				model = model[1:]
			}
		default:
			removed := r.Filter(func(v int) bool { return v%3 != 0 }, nil)
			var kept, gone []int
			for _, v := range model {
				if v%3 != 0 {
					kept = append(kept, v)
				} else {
					gone = append(gone, v)
				}
			}
			if len(removed) != len(gone) {
				t.Fatalf("step %d: Filter removed %v, want %v", step, removed, gone)
			}
			model = kept
		}
		if r.Len() != len(model) {
			t.Fatalf("step %d: Len %d, want %d", step, r.Len(), len(model))
		}
		for i, v := range model {
			if r.At(i) != v {
				t.Fatalf("step %d: At(%d) = %d, want %d", step, i, r.At(i), v)
			}
		}
		if p, ok := r.PeekFront(); ok != (len(model) > 0) || ok && p != model[0] {
			t.Fatalf("step %d: PeekFront = %d, %v", step, p, ok)
		}
	}
}

func TestRingPushPopDoesNotAllocate(t *testing.T) {
	var r Ring[*int]
	x := new(int)
	r.PushBack(x)
	r.PopBack()
	if n := testing.AllocsPerRun(1000, func() {
		r.PushBack(x)
		r.PopBack()
	}); n != 0 {
		t.Fatalf("push+pop allocates %v times", n)
	}
}
