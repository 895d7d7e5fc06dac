package tiny

// Base is embedded in Mid.
type Base struct {
	Size int
}

// limit uses mid.go's Mid: the arrow that goes up.
func limit() int { return len(Mid{}.Base.name()) }

func (Base) name() string { return "base" }
