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

// callFactory calls the factory in call's context (nil: the pool's own,
// for the pool itself). See factoryCall for when a caller's giving up ends
// it; Close ends every one.
func (p *Pool[T]) callFactory(call *factoryCall) (v T, err error) {
	defer func() {
		if x := recover(); x != nil {
			err = p.recovered("Factory", x)
		}
	}()
	ctx := p.bgCtx
	if call != nil {
		defer call.end()
		ctx = call.ctx
	}
	return p.cfg.Factory(ctx)
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
func (p *Pool[T]) createEvent(err error) Event {
	if p.askAbout("AtLimit", p.cfg.AtLimit, err) {
		return EventAtLimit
	}
	return EventCreateFailed
}

// askAbout asks test, a user's test of factory errors named name, about
// err: nil or a panic count as no.
func (p *Pool[T]) askAbout(name string, test func(error) bool, err error) (yes bool) {
	if test == nil {
		return false
	}
	defer func() {
		if x := recover(); x != nil {
			_ = p.recovered(name, x)
			yes = false
		}
	}()
	return test(err)
}

func (p *Pool[T]) callOnStateChange(from, to State, cause error) {
	defer func() {
		if x := recover(); x != nil {
			_ = p.recovered("OnStateChange", x)
		}
	}()
	p.cfg.OnStateChange(from, to, cause)
}

// reportCheckFailed tells the strategy that an idle resource failed its
// check.
func (p *Pool[T]) reportCheckFailed() {
	p.mu.Lock()
	strategy := p.strategy
	p.mu.Unlock()
	if strategy != nil {
		p.report(strategy, EventCheckFailed, errCheckFailed)
	}
}

var errCheckFailed = fmt.Errorf("pool: an idle resource failed its check")
