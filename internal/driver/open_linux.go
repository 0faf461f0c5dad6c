//go:build linux

package driver

func constructors() map[string]func() (Driver, error) {
	return map[string]func() (Driver, error){
		"epoll":    func() (Driver, error) { return NewEpoll() },
		"poll":     func() (Driver, error) { return NewPoll() },
		"io_uring": func() (Driver, error) { return NewURing() },
	}
}

func choices() string { return "auto, epoll, io_uring, poll" }

// uringFirstByDefault: whether "auto" tries io_uring before epoll. No:
// measured on Ruby 3.3 (bench/http_hello.rb with wrk -t1, and pipe and
// socket ping-pong; alternating runs on a shared 2-CPU machine), io_uring
// is not level with epoll on every row: it makes fewer system calls (HTTP:
// 1.1 per request against 2.1; ping-pong: 4 per round trip against 8), but
// costs more CPU per request at 1,000 HTTP connections and per round trip
// on ping-pong, and its slowest requests were no better. The numbers are in
// docs/behaviour.md. FARCE_IO_URING_AUTO=1 makes auto try io_uring first
// (and fall back to epoll with a reason); backend: :io_uring or
// FARCE_BACKEND=io_uring name it.
const uringFirstByDefault = false

func autoPrefersURing() bool {
	switch uringGetenv(envAuto) {
	case "0":
		return false
	case "1":
		return true
	}
	return uringFirstByDefault
}

func openAuto() (Driver, string, error) {
	reason := ""
	if autoPrefersURing() {
		u, err := NewURing()
		if err == nil {
			return u, "", nil
		}
		reason = err.Error() + "; using epoll"
	}
	d, err := NewEpoll()
	if err == nil {
		return d, reason, nil
	}
	p, perr := NewPoll()
	if perr != nil {
		return nil, "", perr
	}
	if reason != "" {
		reason += ", but "
	}
	return p, reason + "epoll unavailable: " + err.Error(), nil
}
