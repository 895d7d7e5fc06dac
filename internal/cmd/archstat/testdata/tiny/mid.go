package tiny

// Mid embeds Base, declared in base.go.
type Mid struct {
	Base
}

// Run has complexity 1 + if + for + range + 2 cases + && + || = 8.
func (m Mid) Run(n int) int {
	if n > 0 && n < 10 || n == 100 {
		n = m.Size // a promoted field: an arrow to base.go through Base
	}
	for i := 0; i < n; i++ {
		n--
	}
	for range n {
		switch n {
		case 1:
			n++
		case 2, 3:
			n--
		default:
		}
	}
	return n
}
