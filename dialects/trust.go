package dialects

// FunctionTruster is implemented by a connection whose tracking is
// default-deny: a statement that calls a function or procedure the dialect
// does not know to leave the session alone (a user's function, CALL, a
// write to pg_settings, a string handed to the server to run) counts as a
// session change, since nothing the server reports need show what it did.
// pooldriver calls TrustFunctions(true) on every new connection when the
// user vouches for their functions (pool_trust_functions=true): such calls
// then count only for what their text or the server shows.
type FunctionTruster interface {
	TrustFunctions(trust bool)
}
