// Package sched is farce's scheduler core: waits named by tokens, a FIFO
// ready queue, timers, per-descriptor waiter lists with cached readiness, and
// statistics. It knows nothing of Ruby: the C extension maps tokens to fibers.
//
// A Scheduler is used by one thread at a time (the export layer serialises
// access); only its driver's Wake may be called concurrently.
package sched

import "fmt"

// Token names one wait. The low 32 bits are a slot index, the high 32 bits
// the slot's generation at the time of the wait, so that a token kept after
// its wait ended can never wake the slot's next user. The zero Token is
// never issued.
type Token uint64

func makeToken(slot uint32, gen uint32) Token { return Token(uint64(gen)<<32 | uint64(slot)) }

// Slot is the index of the wait's slot; the extension keeps its fiber there.
func (t Token) Slot() uint32 { return uint32(t) }

// Gen is the generation of the slot when the wait began.
func (t Token) Gen() uint32 { return uint32(t >> 32) }

func (t Token) String() string { return fmt.Sprintf("%d/%d", t.Slot(), t.Gen()) }

// Results a completion can carry. Descriptor waits complete with the ready
// events (always > 0) instead of ResultWoken.
const (
	ResultTimedOut int64 = 0  // the wait's timeout expired
	ResultWoken    int64 = 1  // Wake was called, or the wait was a yield
	ResultClosed   int64 = -1 // the descriptor was closed or handed to a new owner
)

// Completion is a finished wait handed back to the extension.
type Completion struct {
	Token  Token
	Result int64
}
