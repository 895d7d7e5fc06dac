package pool

import (
	"context"
	"fmt"
)

// The user's callbacks run outside mu, and a panic in one is recovered and
// counted, so that it can neither leave the lock held nor leak a slot.

func (p *Pool[T]) recovered(what string, v any) error {
	p.mu.Lock()
	p.stats.panics++
	p.mu.Unlock()
	return fmt.Errorf("pool: %s panicked: %v", what, v)
}

func (p *Pool[T]) callFactory() (v T, err error) {
	defer func() {
		if x := recover(); x != nil {
			err = p.recovered("Factory", x)
		}
	}()
	v, err = p.cfg.Factory(p.bgCtx)
	if err != nil {
		err = fmt.Errorf("pool: factory: %w", err)
	}
	return v, err
}

func (p *Pool[T]) callCheck(f func(T) bool, v T) (ok bool) {
	defer func() {
		if x := recover(); x != nil {
			_ = p.recovered("BeforeRelease", x)
			ok = false
		}
	}()
	return f(v)
}

func (p *Pool[T]) callBeforeAcquire(ctx context.Context, r *Resource[T]) (ok bool) {
	defer func() {
		if x := recover(); x != nil {
			_ = p.recovered("BeforeAcquire", x)
			ok = false
		}
	}()
	return p.cfg.BeforeAcquire(ctx, r)
}

func (p *Pool[T]) callHealthcheck(v T) (err error) {
	defer func() {
		if x := recover(); x != nil {
			err = p.recovered("Healthcheck", x)
		}
	}()
	ctx, cancel := context.WithTimeout(p.bgCtx, p.cfg.HealthcheckTimeout)
	defer cancel()
	return p.cfg.Healthcheck(ctx, v)
}

func (p *Pool[T]) destruct(v T) {
	if p.cfg.Destructor == nil {
		return
	}
	defer func() {
		if x := recover(); x != nil {
			_ = p.recovered("Destructor", x)
		}
	}()
	p.cfg.Destructor(v)
}

// report tells the strategy what happened.
func (p *Pool[T]) report(s Strategy, ev Event, err error) {
	defer func() {
		if x := recover(); x != nil {
			_ = p.recovered("Strategy", x)
		}
	}()
	s.Report(p, ev, err)
}

// createEvent classifies a factory error with Config.AtLimit.
func (p *Pool[T]) createEvent(err error) (ev Event) {
	if p.cfg.AtLimit == nil {
		return EventCreateFailed
	}
	defer func() {
		if x := recover(); x != nil {
			_ = p.recovered("AtLimit", x)
			ev = EventCreateFailed
		}
	}()
	if p.cfg.AtLimit(err) {
		return EventAtLimit
	}
	return EventCreateFailed
}

func (p *Pool[T]) callOnStateChange(from, to State, cause error) {
	defer func() {
		if x := recover(); x != nil {
			_ = p.recovered("OnStateChange", x)
		}
	}()
	p.cfg.OnStateChange(from, to, cause)
}
