// Package outer reaches into inner, TestSealed's sealed package.
package outer

import "github.com/pooldriver/pooldriver/internal/cmd/archstat/testdata/sealed/inner"

// Use does what TestSealed expects reported, and what it does not.
func Use(c *inner.Conn) int {
	c.Count = 1   // writes c.Count
	c.Mu.Lock()   // locks c.Mu (Lock)
	n := c.St.N   // reads c.St
	c.Mu.Unlock() // locks c.Mu (Unlock)
	c.Locked(func(st *inner.State) { n += st.N })
	return n + c.Count + c.Ptr.N
}
