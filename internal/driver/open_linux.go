//go:build linux

package driver

func constructors() map[string]func() (Driver, error) {
	return map[string]func() (Driver, error){
		"epoll": func() (Driver, error) { return NewEpoll() },
		"poll":  func() (Driver, error) { return NewPoll() },
	}
}

func choices() string { return "auto, epoll, poll" }

func openAuto() (Driver, string, error) {
	d, err := NewEpoll()
	if err == nil {
		return d, "", nil
	}
	p, perr := NewPoll()
	if perr != nil {
		return nil, "", perr
	}
	return p, "epoll unavailable: " + err.Error(), nil
}
