//go:build linux

package driver

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// The io_uring structures shared with the kernel, field by field, against
// the offsets <linux/io_uring.h> gives (printed by a C program compiled from
// that header for x86_64 and for aarch64: the same on both, as the ABI has
// only fixed-width fields). The driver's init checks the sizes; the offsets
// matter too, and qemu-user cannot set up a ring to show a mistake at run
// time (io_uring_setup is ENOSYS there): this runs on arm64 under qemu-user
// in .ci/cross-compile.sh.
func TestURingStructsMatchTheKernelABI(t *testing.T) {
	var sqe uringSQE
	var cqe uringCQE
	var p uringParams
	var arg uringGeteventsArg
	var probe uringProbe
	for name, got := range map[string][2]uintptr{
		"sizeof(io_uring_sqe)":           {64, unsafe.Sizeof(sqe)},
		"sizeof(io_uring_cqe)":           {16, unsafe.Sizeof(cqe)},
		"sizeof(io_uring_params)":        {120, unsafe.Sizeof(p)},
		"sizeof(io_uring_getevents_arg)": {24, unsafe.Sizeof(arg)},
		"sizeof(io_uring_probe_op)":      {8, unsafe.Sizeof(uringProbeOp{})},
		"sqe.fd":                         {4, unsafe.Offsetof(sqe.Fd)},
		"sqe.off":                        {8, unsafe.Offsetof(sqe.Off)},
		"sqe.addr":                       {16, unsafe.Offsetof(sqe.Addr)},
		"sqe.len":                        {24, unsafe.Offsetof(sqe.Len)},
		"sqe.poll32_events":              {28, unsafe.Offsetof(sqe.OpFlags)},
		"sqe.user_data":                  {32, unsafe.Offsetof(sqe.UserData)},
		"sqe.buf_index":                  {40, unsafe.Offsetof(sqe.BufIndex)},
		"sqe.splice_fd_in":               {44, unsafe.Offsetof(sqe.SpliceFdIn)},
		"sqe.addr3":                      {48, unsafe.Offsetof(sqe.Addr3)},
		"cqe.res":                        {8, unsafe.Offsetof(cqe.Res)},
		"cqe.flags":                      {12, unsafe.Offsetof(cqe.Flags)},
		"params.features":                {20, unsafe.Offsetof(p.Features)},
		"params.sq_off":                  {40, unsafe.Offsetof(p.SQOff)},
		"params.cq_off":                  {80, unsafe.Offsetof(p.CQOff)},
		"getevents_arg.ts":               {16, unsafe.Offsetof(arg.Ts)},
		"probe.ops":                      {16, unsafe.Offsetof(probe.Ops)},
	} {
		assert.Equal(t, got[0], got[1], name)
	}
}
