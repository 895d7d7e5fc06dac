package pool

// A pool is the [Breaker] its [Strategy] drives: the state changes below.
var _ Breaker = (*Pool[int])(nil)

// State returns the circuit breaker's state.
func (p *Pool[T]) State() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// Activate closes the circuit (Active, "closed"): the pool works normally.
func (p *Pool[T]) Activate() { p.setState(Active) }

// Deactivate opens the circuit (Inactive, "open"): the backend is
// unreachable.
func (p *Pool[T]) Deactivate() { p.setState(Inactive) }

// Recover half-opens the circuit (Recovering, "half-open"): one trial
// factory call at a time.
func (p *Pool[T]) Recover() { p.setState(Recovering) }

// Limit stops creating resources (Limited, "limited"): the backend is
// full.
func (p *Pool[T]) Limit() { p.setState(Limited) }

func (p *Pool[T]) setState(s State) {
	p.notifyMu.Lock() // state changes reach OnStateChange in their order
	defer p.notifyMu.Unlock()
	p.mu.Lock()
	from := p.state
	if p.closed || from == s {
		p.mu.Unlock()
		return
	}
	p.state = s
	p.trial = false
	p.stats.stateChanges++
	cause := p.lastFailure
	// Waiters that need a new resource learn what the new state means
	// for them: a factory call, a wait, or an error. A trial may refill
	// to Min, with or without a caller waiting.
	p.startFactoriesLocked()
	p.fillToMinLocked()
	p.mu.Unlock()
	if p.cfg.OnStateChange != nil {
		p.callOnStateChange(from, s, cause)
	}
}

// SetStrategy installs s (nil: none) to drive the circuit breaker. A nil
// pointer of a Strategy type (a nil *ThresholdStrategy) counts as nil:
// none, as New's Config.Strategy cannot be (New refuses it).
func (p *Pool[T]) SetStrategy(s Strategy) {
	if isNilPointer(s) {
		s = nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setStrategyLocked(s)
}

func (p *Pool[T]) setStrategyLocked(s Strategy) {
	p.strategy = s
	_, quiet := s.(ignoresReleases)
	p.onRelease = s != nil && !quiet
	p.releaseEvents.Store(p.onRelease)
}
