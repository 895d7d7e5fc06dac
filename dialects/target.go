package dialects

import "fmt"

// Target is which of a DSN's servers a new connection may go to
// (pool_target).
type Target int

const (
	// TargetAny: the first server that answers, in the DSN's order (on
	// PostgreSQL, as its target_session_attrs says).
	TargetAny Target = iota
	// TargetPrimary: the first server that takes writes (MySQL/MariaDB:
	// @@global.read_only off; PostgreSQL: target_session_attrs=read-write).
	TargetPrimary
)

// String returns the pool_target value: "any" or "primary".
func (t Target) String() string {
	switch t {
	case TargetAny:
		return "any"
	case TargetPrimary:
		return "primary"
	}
	return fmt.Sprintf("Target(%d)", int(t))
}

// ParseTarget parses a pool_target value.
func ParseTarget(s string) (Target, error) {
	switch s {
	case "any":
		return TargetAny, nil
	case "primary":
		return TargetPrimary, nil
	}
	return 0, fmt.Errorf("want any or primary (a server that takes writes), not %q", s)
}

// TargetTemplate is implemented by a Template whose dialect can tell the
// server that takes writes from the others. pooldriver calls Targeted
// once, where pool_target is other than TargetAny, and uses the Template
// it returns; an error names what in the DSN asks for another server. A
// dialect whose Template does not implement it accepts only TargetAny.
type TargetTemplate interface {
	Template
	Targeted(t Target) (Template, error)
}
