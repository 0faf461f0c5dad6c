package driver

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestAfdMapping(t *testing.T) {
	assert.Equal(t, uint32(afdPollTrouble|afdPollReceive|afdPollAccept), eventsToAfd(Readable))
	assert.Equal(t, uint32(afdPollTrouble|afdPollSend), eventsToAfd(Writable))
	assert.Equal(t, uint32(afdPollTrouble|afdPollReceiveExpedited), eventsToAfd(Priority))
	assert.Equal(t, uint32(afdPollTrouble), eventsToAfd(0), "trouble is always watched")

	rwh := Readable | Writable | Hangup
	for in, want := range map[uint32]Events{
		afdPollReceive:                  Readable,
		afdPollAccept:                   Readable,
		afdPollSend:                     Writable,
		afdPollReceiveExpedited:         Priority,
		afdPollReceive | afdPollSend:    Readable | Writable,
		afdPollDisconnect:               rwh,
		afdPollAbort:                    rwh,
		afdPollLocalClose:               rwh,
		afdPollConnectFail:              rwh,
		afdPollDisconnect | afdPollSend: rwh,
		0:                               0,
	} {
		assert.Equal(t, want, afdToEvents(in), "afd %#x", in)
	}
}
