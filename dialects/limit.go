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

var (
	limitMu   sync.RWMutex
	limitFunc []func(error) bool
)

// RegisterConnLimitDetector registers f, which the Template of Wrap
// consults: a wrapped connector's connect error that any registered f
// recognizes counts as "at the connection limit". A dialect package calls
// it from init, with the test its own Template uses.
func RegisterConnLimitDetector(f func(err error) bool) {
	if f == nil {
		return
	}
	limitMu.Lock()
	limitFunc = append(limitFunc, f)
	limitMu.Unlock()
}

// AtConnLimit is the generic Template's ConnLimitDetector: whether a
// registered dialect recognizes err.
func (genericTemplate) AtConnLimit(err error) bool {
	limitMu.RLock()
	defer limitMu.RUnlock()
	for _, f := range limitFunc {
		if f(err) {
			return true
		}
	}
	return false
}

var _ ConnLimitDetector = genericTemplate{}
