package pool_test

import (
	"context"
	"fmt"

	"github.com/pooldriver/pooldriver/pool"
)

func Example() {
	next := 0
	p, err := pool.New(pool.Config[string]{
		Factory: func(context.Context) (string, error) {
			next++
			return fmt.Sprintf("conn-%d", next), nil
		},
		Destructor: func(s string) { fmt.Println("closed", s) },
		Max:        2,
	})
	if err != nil {
		panic(err)
	}
	r, err := p.Acquire(context.Background())
	if err != nil {
		panic(err)
	}
	fmt.Println("using", r.Value())
	r.Release()

	r, _ = p.Acquire(context.Background()) // the idle one, reused
	fmt.Println("using", r.Value())
	r.Release()

	p.Close()
	s := p.Stats()
	fmt.Println("created", s.Created, "destroyed", s.Destroyed)
	// Output:
	// using conn-1
	// using conn-1
	// closed conn-1
	// created 1 destroyed 1
}
