package sqllex

// Facts are what the lexer tells of a text of statements: whether it may
// change the session by what its words show (ChangesSession), what it
// calls that they do not show (CallsOf; Changes combines the two), and what
// it does to the transaction (TxEffectOf).
type Facts struct {
	ChangesSession bool
	Calls          Calls
	Tx             TxEffect
	Refs           *Refs // what the text names (RefsOf), for Shadows
}

// ChangesWith is Changes, and also a text that names what shadows says
// runs code the text does not show, unless the user trusts their
// functions (that code is theirs: an overload, a trigger, a policy).
func (f Facts) ChangesWith(trustFunctions bool, shadows *Shadows) bool {
	return f.Changes(trustFunctions) || !trustFunctions && f.Refs.Meets(shadows)
}

// Of returns the Facts of query read as flavor f, remembered for the texts
// seen recently (see Memo): the statement path asks them of every
// statement.
func Of(query string, f Flavor) Facts {
	return factsMemos[f&Any].Get(query)
}

var factsMemos = func() (m [Any + 1]*Memo[Facts]) {
	for f := range m {
		m[f] = NewMemo(func(q string) Facts {
			return Facts{
				ChangesSession: ChangesSession(q, Flavor(f)),
				Calls:          CallsOf(q, Flavor(f)),
				Tx:             TxEffectOf(q, Flavor(f)),
				Refs:           RefsOf(q, Flavor(f)),
			}
		})
	}
	return m
}()
