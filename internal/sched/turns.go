package sched

// Turns: a fiber that held the loop past its budget gives the loop a turn
// (ext/farce/loop/event_loop.c). It must then run again only after what became
// ready meanwhile: the timers that fell due while it ran and the
// descriptors the next poll finds ready. A plain Yield finishes at once and
// so would run first in the next batch, ahead of them.

// YieldLast starts a wait that finishes at the end of the next poll, after
// the timers it fires and the events it delivers. Until then the slot is
// parked with no timer and no descriptor: Cancel releases it as any park.
func (s *Scheduler) YieldLast() (Token, error) {
	if s.closed {
		return 0, ErrClosed
	}
	i, sl := s.park(-1)
	tok := makeToken(i, sl.gen)
	s.behind = append(s.behind, tok)
	return tok, nil
}

// finishBehind finishes the YieldLast waits still parked, in the order they
// began (EndPoll, last).
func (s *Scheduler) finishBehind() {
	for _, tok := range s.behind {
		if i, sl := s.slots.lookup(tok); sl != nil && sl.state == slotParked {
			s.finish(i, ResultWoken)
		}
	}
	s.behind = s.behind[:0]
}
