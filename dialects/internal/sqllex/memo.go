package sqllex

import (
	"hash/maphash"
	"sync/atomic"
)

// Memo remembers the answers of f, a pure function of a statement's text,
// for the texts seen recently. An application sends the same texts again
// and again (an ORM's, a prepared statement's): a text met before costs a
// hash and a comparison instead of lexing. The memory is a fixed table in
// which a text replaces the one of the same slot, so it stays bounded
// whatever the texts; one longer than maxMemoText is not kept (lexing it is
// cheap beside what the server does with it, and it would pin memory). A
// Memo is safe for concurrent use.
type Memo[T any] struct {
	f     func(string) T
	seed  maphash.Seed
	slots [memoSlots]atomic.Pointer[memoEntry[T]]
}

const (
	memoSlots   = 512 // a power of two
	maxMemoText = 4096
)

type memoEntry[T any] struct {
	query  string
	answer T
}

// NewMemo returns a Memo of f.
func NewMemo[T any](f func(query string) T) *Memo[T] {
	return &Memo[T]{f: f, seed: maphash.MakeSeed()}
}

// Get returns f(query), remembered or computed.
func (m *Memo[T]) Get(query string) T {
	if len(query) > maxMemoText {
		return m.f(query)
	}
	slot := &m.slots[maphash.String(m.seed, query)&(memoSlots-1)]
	if e := slot.Load(); e != nil && e.query == query {
		return e.answer
	}
	answer := m.f(query)
	slot.Store(&memoEntry[T]{query: query, answer: answer})
	return answer
}
