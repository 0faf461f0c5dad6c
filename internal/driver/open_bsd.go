//go:build darwin || freebsd || netbsd || openbsd

package driver

func constructors() map[string]func() (Driver, error) {
	return map[string]func() (Driver, error){
		"kqueue": func() (Driver, error) { return NewKqueue() },
		"poll":   func() (Driver, error) { return NewPoll() },
	}
}

func choices() string { return "auto, kqueue, poll" }

func openAuto() (Driver, string, error) {
	d, err := NewKqueue()
	if err == nil {
		return d, "", nil
	}
	p, perr := NewPoll()
	if perr != nil {
		return nil, "", perr
	}
	return p, "kqueue unavailable: " + err.Error(), nil
}
