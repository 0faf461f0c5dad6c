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

// uringFirstByDefault: whether "auto" tries io_uring before epoll. Not
// yet: in one-shot mode (the safe one, see URing) io_uring measured a few
// percent slower than epoll on bench/pingpong.rb (README.md). With
// FARCE_IO_URING_AUTO=1 in the environment auto tries io_uring first and
// reports why it fell back to epoll.
const uringFirstByDefault = false

func autoPrefersURing() bool { return uringFirstByDefault || uringGetenv(envAuto) == "1" }

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
