package driver

// AFD poll event bits (the AFD_POLL_* values of the Windows ancillary
// function driver, as used by wepoll and libuv). They live in a file without
// a build tag so that the mapping is unit tested on every system.
const (
	afdPollReceive          = 0x0001
	afdPollReceiveExpedited = 0x0002
	afdPollSend             = 0x0004
	afdPollDisconnect       = 0x0008
	afdPollAbort            = 0x0010
	afdPollLocalClose       = 0x0020
	afdPollAccept           = 0x0080
	afdPollConnectFail      = 0x0100

	// afdPollTrouble is always asked for: a waiter in either direction must
	// be woken by a reset, a failed connect, a FIN or a close.
	afdPollTrouble = afdPollDisconnect | afdPollAbort | afdPollLocalClose | afdPollConnectFail
)

// eventsToAfd is the AFD poll mask for a wait on events.
func eventsToAfd(e Events) uint32 {
	m := uint32(afdPollTrouble)
	if e&Readable != 0 {
		m |= afdPollReceive | afdPollAccept
	}
	if e&Priority != 0 {
		m |= afdPollReceiveExpedited
	}
	if e&Writable != 0 {
		m |= afdPollSend
	}
	return m
}

// afdToEvents maps the AFD events a poll reported. Hang-ups and errors are
// readable and writable at once, so that whichever direction waits retries
// its call and sees the cause (0 bytes, WSAECONNRESET, WSAENOTSOCK).
func afdToEvents(m uint32) Events {
	var e Events
	if m&(afdPollReceive|afdPollAccept) != 0 {
		e |= Readable
	}
	if m&afdPollReceiveExpedited != 0 {
		e |= Priority
	}
	if m&afdPollSend != 0 {
		e |= Writable
	}
	if m&afdPollTrouble != 0 {
		e |= Readable | Writable | Hangup
	}
	return e
}
