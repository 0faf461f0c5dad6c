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

// uringFirstByDefault: whether "auto" tries io_uring before epoll. Yes since
// io_uring performs io_read/io_write as completion operations
// (uring_ops_linux.go): measured on bench/ (Ruby 3.1, 2 cores, medians of
// 13 alternating runs) at least as fast as epoll on ping-pong (1 pair +3 %,
// 100 pairs +19 %) and faster on HTTP hello (64 connections +11 %, 1,000
// +31 %); see README.md. FARCE_IO_URING_AUTO=0 makes auto keep epoll;
// when io_uring cannot be set up, auto uses epoll and says why.
const uringFirstByDefault = true

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
