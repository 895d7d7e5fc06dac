package sqllex

// Facts are what the lexer tells of a text of statements: whether it may
// change the session by what its words show (ChangesSession), what it
// calls that they do not show (CallsOf), and what it does to the
// transaction (TxEffectOf). Session and SessionWith hand the first two to
// Verdict.
type Facts struct {
	ChangesSession bool
	// OnlySettings: for PostgreSQL, every change ChangesSession found is
	// to a setting (OnlySettings); false for other flavors where it found
	// any.
	OnlySettings bool
	Calls        Calls
	Tx           TxEffect
	Refs         *Refs // what the text names (RefsOf), for Shadows
	// Unknown: for PostgreSQL and MySQL, where Calls is CallsUnknown, the
	// names of the functions called that are not on the list
	// (UnknownCallsOf); nil where a call names none.
	Unknown []string
	// Path: for PostgreSQL, what the text does with search_path's choice
	// of schema (PathUseOf).
	Path PathUse
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
			facts := Facts{
				ChangesSession: ChangesSession(q, Flavor(f)),
				Calls:          CallsOf(q, Flavor(f)),
				Tx:             TxEffectOf(q, Flavor(f)),
				Refs:           RefsOf(q, Flavor(f)),
			}
			facts.OnlySettings = !facts.ChangesSession
			if Flavor(f) == Postgres {
				facts.Path = PathUseOf(q)
				facts.OnlySettings = facts.OnlySettings || OnlySettings(q)
			}
			if facts.Calls == CallsUnknown && (Flavor(f) == Postgres || Flavor(f) == MySQL) {
				facts.Unknown, _ = UnknownCallsOf(q, Flavor(f))
			}
			return facts
		})
	}
	return m
}()
