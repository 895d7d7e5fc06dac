package tiny

// twice is used by no file and uses none.
func twice(n int) int { return 2 * n }
