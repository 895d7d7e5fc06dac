package pool

import "time"

// counters are the cumulative part of Stats, guarded by Pool.mu.
type counters struct {
	acquires, waits, canceled, timeouts, circuitRejects   int64
	created, createErrors, destroyed, expired, hcFailures int64
	releaseRejects, panics, backoffRejects, trimmed       int64
	stateChanges, failFast                                int64
	waitDuration                                          time.Duration

	// immediate counts the acquires served at once from idle: waits of 0,
	// added to waitTime by Stats so that their path only adds one.
	immediate                     int64
	reuses                        int64 // Unparks of resources destroyed since (the others count on each resource)
	parkEnds                      int64 // parks ended other than by Unpark: taken by the pool, or expired at Unpark
	untimed                       int64 // uses that ended untimed, other than by Park (Stats adds those)
	waitTime, useTime, createTime Histogram
}
