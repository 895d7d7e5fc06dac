package dialects

import "sync"

// ConnLimitDetector is implemented by a Template whose database says, when
// it refuses a new connection, that it refused it for want of room: it is
// up, and at its connection limit (PostgreSQL SQLSTATE 53300, MySQL 1040,
// 1203, 1226). pooldriver's circuit breaker then stops opening connections
// and serves callers from those it has, instead of taking the server for
// unreachable. Errors of statements are never asked about.
type ConnLimitDetector interface {
	AtConnLimit(err error) bool
}

var limitFuncs detectors

// RegisterConnLimitDetector registers f, which the Template of Wrap
// consults: a wrapped connector's connect error that any registered f
// recognizes counts as "at the connection limit". A dialect package calls
// it from init, with the test its own Template uses.
func RegisterConnLimitDetector(f func(err error) bool) { limitFuncs.add(f) }

// AtConnLimit is the generic Template's ConnLimitDetector: whether a
// registered dialect recognizes err.
func (genericTemplate) AtConnLimit(err error) bool { return limitFuncs.any(err) }

var _ ConnLimitDetector = genericTemplate{}

// detectors is a list of tests of connect errors, which dialect packages
// register from init and the generic Template consults.
type detectors struct {
	mu sync.RWMutex // protects fs
	fs []func(error) bool
}

func (d *detectors) add(f func(error) bool) {
	if f == nil {
		return
	}
	d.mu.Lock()
	d.fs = append(d.fs, f)
	d.mu.Unlock()
}

// any reports whether one of the tests recognizes err.
func (d *detectors) any(err error) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, f := range d.fs {
		if f(err) {
			return true
		}
	}
	return false
}
