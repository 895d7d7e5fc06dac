package sqllex

// SessionFacts are what a dialect knows of one statement that bears on
// whether it changed the session: what its text does, what the server's
// catalog says it runs, what the server reported, whether it failed where
// that may have hidden a change, and whether a transaction is open.
// Verdict combines them; a dialect fills in the facts it has and leaves
// the others false.
type SessionFacts struct {
	// What the text does, as the lexer reads it (Facts). Text: its words
	// change the session (Facts.ChangesSession), it runs SQL the server
	// takes from a string (CallsText), or it may change the session where
	// the server does not report it (MySQL's EXECUTE and compound
	// statements); it counts whoever vouches for what. Calls: it calls a
	// function or procedure off the flavor's list of built-ins
	// (CallsUnknown).
	Text  bool
	Calls bool

	// What the catalog's reading the text was judged by says it runs.
	// Vouched: the reading proves every call off the list harmless
	// (Shadows.Vouched; MySQL: one CALL of a procedure it proves
	// harmless). Runs: the text names what the reading says runs code the
	// text does not show (Refs.Meets: an overload, a trigger, a policy; no
	// reading at all: anything it names; MySQL: a write where the reading
	// cannot see every trigger). Unread: the statement may have changed
	// the catalog and no reading taken after it could be had. Where a
	// dialect reads no catalog, Vouched and Runs stay false.
	Vouched bool
	Runs    bool
	Unread  bool

	// Later: a reading was taken after the statement ran (MySQL, after
	// DDL or where there was none), and LaterVouched and LaterRuns are
	// what it says of the text, as Vouched and Runs; the text counts when
	// either reading says it runs code.
	Later        bool
	LaterVouched bool
	LaterRuns    bool

	// Trust: the user vouches for their functions and what the catalog
	// says runs (dialects.FunctionTruster): Calls and Runs then count only
	// where a failure hid what the server would have reported.
	Trust bool

	// What the server reported. Reported: a change of the session that
	// stands (MySQL: SERVER_SESSION_STATE_CHANGED, autocommit other than
	// the session started with). Params: a reported parameter differs from
	// the session's start (PostgreSQL's ParameterStatus); it counts only
	// with no transaction open (TxOpen), whose end may revert it (SET
	// LOCAL).
	Reported bool
	Params   bool
	TxOpen   bool

	// Failed: the statement failed and the server's answer says nothing
	// of what it did first (MySQL's ERR packet carries no flags).
	// MayRunCode: it writes (a trigger may fire) or may open or end a
	// transaction. A failed statement counts where it may have run code:
	// MayRunCode, or Calls and Runs as if nobody vouched for them.
	Failed     bool
	MayRunCode bool
}

// Verdict reports whether a statement with the facts s counts as changing
// the session, so that its connection is reset before anyone else uses it.
// It is the one place the facts are combined: text ∨ catalog ∨ what the
// server reported ∨ a failure that may have run code. False means the
// session is known to be as it was.
func Verdict(s SessionFacts) bool {
	code := s.Runs || s.Calls && !s.Vouched // code the text does not show
	later := s.Later && (s.LaterRuns || s.Calls && !s.LaterVouched)
	return s.Text || s.Unread || (code || later) && !s.Trust ||
		s.Reported || s.Params && !s.TxOpen ||
		s.Failed && (s.MayRunCode || code)
}

// Session returns the facts of the text f for Verdict, with no catalog:
// trust is whether the user vouches for their functions.
func (f Facts) Session(trust bool) SessionFacts {
	return SessionFacts{
		Text:  f.ChangesSession || f.Calls == CallsText,
		Calls: f.Calls == CallsUnknown,
		Trust: trust,
	}
}

// SessionWith is Session and what the catalog's reading shadows says of
// the text (nil: there is no reading, and anything the text names counts).
func (f Facts) SessionWith(trust bool, shadows *Shadows) SessionFacts {
	s := f.Session(trust)
	s.Vouched = s.Calls && shadows.Vouched(f.Unknown)
	s.Runs = f.Refs.Meets(shadows)
	return s
}
