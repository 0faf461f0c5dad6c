//go:build windows

package driver

import (
	"unsafe"

	"golang.org/x/sys/windows"
)

// Windows calls and structures the IOCP driver needs that x/sys/windows
// does not provide.

var (
	modntdll    = windows.NewLazySystemDLL("ntdll.dll")
	modkernel32 = windows.NewLazySystemDLL("kernel32.dll")
	modws2_32   = windows.NewLazySystemDLL("ws2_32.dll")

	procNtDeviceIoControlFile       = modntdll.NewProc("NtDeviceIoControlFile")
	procGetQueuedCompletionStatusEx = modkernel32.NewProc("GetQueuedCompletionStatusEx")
	procWSAPoll                     = modws2_32.NewProc("WSAPoll")
)

const (
	ioctlAfdPoll     = 0x00012024
	sioBaseHandle    = 0x48000022
	sioBspHandlePoll = 0x4800001D
	statusSuccess    = windows.NTStatus(0)
	waitTimeout      = windows.Errno(258) // WAIT_TIMEOUT
	infiniteTimeout  = 0xFFFFFFFF
	wsaeNotSock      = windows.Errno(10038)
)

// afdPollHandleInfo and afdPollInfo are AFD_POLL_HANDLE_INFO and
// AFD_POLL_INFO: the poll request, which the kernel overwrites with the
// result when the poll completes.
type afdPollHandleInfo struct {
	Handle windows.Handle
	Events uint32
	Status windows.NTStatus
}

type afdPollInfo struct {
	Timeout         int64
	NumberOfHandles uint32
	Exclusive       uint32
	Handles         [1]afdPollHandleInfo
}

// overlappedEntry is OVERLAPPED_ENTRY. Overlapped is a uintptr, not a
// pointer: for AFD polls it carries our opID (the ApcContext), which is no
// address, and the garbage collector must never see it as one.
type overlappedEntry struct {
	Key        uintptr
	Overlapped uintptr
	Internal   uintptr
	Qty        uint32
}

func ntDeviceIoControlFile(h windows.Handle, apcContext uintptr, iosb *windows.IO_STATUS_BLOCK, code uint32, in unsafe.Pointer, inLen uint32, out unsafe.Pointer, outLen uint32) windows.NTStatus {
	r, _, _ := procNtDeviceIoControlFile.Call(uintptr(h), 0, 0, apcContext,
		uintptr(unsafe.Pointer(iosb)), uintptr(code),
		uintptr(in), uintptr(inLen), uintptr(out), uintptr(outLen))
	return windows.NTStatus(r)
}

func getQueuedCompletionStatusEx(port windows.Handle, entries []overlappedEntry, ms uint32) (int, error) {
	var removed uint32
	r, _, err := procGetQueuedCompletionStatusEx.Call(uintptr(port),
		uintptr(unsafe.Pointer(&entries[0])), uintptr(len(entries)),
		uintptr(unsafe.Pointer(&removed)), uintptr(ms), 0)
	if r == 0 {
		return 0, err
	}
	return int(removed), nil
}

type wsaPollFD struct {
	fd      windows.Handle
	events  int16
	revents int16
}

func wsaPoll(fds []wsaPollFD, ms int32) (int, error) {
	r, _, err := procWSAPoll.Call(uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)), uintptr(ms))
	if int32(r) < 0 {
		return 0, err
	}
	return int(int32(r)), nil
}
