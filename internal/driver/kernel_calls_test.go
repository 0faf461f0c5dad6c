//go:build unix

package driver

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Drivers that count their system calls (Counter) count every Wait that
// reaches the kernel, and io_uring counts its enters apart; stats shows
// them so that users can see the batching.
func TestKernelCallsCount(t *testing.T) {
	for name, ctor := range constructors() {
		t.Run(name, func(t *testing.T) {
			runtime.LockOSThread() // SINGLE_ISSUER rings: one thread (see runConformance)
			defer runtime.UnlockOSThread()
			d, err := ctor()
			if errors.Is(err, ErrUnavailable) {
				skipUnavailable(t, err)
			}
			require.NoError(t, err)
			defer d.Close()
			c, ok := d.(Counter)
			if !ok {
				t.Skipf("%s does not count its system calls", name)
			}
			a, b := newStreamPair(t)
			before := c.KernelCalls()
			require.NoError(t, d.Arm(a.FD(), 1, Readable))
			b.Write(t, []byte("x"))
			_, ok = waitFor(t, d, a.FD(), 1, Readable, Readable, 2*time.Second)
			require.True(t, ok)
			// a blocking Wait that times out enters the kernel once more
			buf := make([]Event, 4)
			for {
				if _, err := d.Wait(buf, time.Millisecond); !isEINTR(err) {
					break
				}
			}
			after := c.KernelCalls()
			assert.GreaterOrEqual(t, after.Total-before.Total, uint64(2))
			assert.LessOrEqual(t, after.Enters, after.Total)
			if name == "io_uring" {
				assert.GreaterOrEqual(t, after.Enters-before.Enters, uint64(2), "the armed poll's submission and the timed wait")
			} else {
				assert.Zero(t, after.Enters)
			}
		})
	}
}
