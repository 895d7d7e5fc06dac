// Package tiny is archstat's test subject: face.go uses mid.go, mid.go uses
// base.go, and base.go uses mid.go back (one upward arrow with -layers).
package tiny

// Open uses mid.go's type and method, and base.go's field through Mid's
// embedded Base, declared in mid.go.
func Open(n int) int {
	var m Mid
	return m.Run(n) + m.Size
}
