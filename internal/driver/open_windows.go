//go:build windows

package driver

func constructors() map[string]func() (Driver, error) {
	return map[string]func() (Driver, error){
		"iocp": func() (Driver, error) { return NewIOCP() },
	}
}

func choices() string { return "auto, iocp" }

// openAuto has no fallback on Windows: without the AFD driver there is no
// readiness at all, and poll(2) does not exist.
func openAuto() (Driver, string, error) {
	d, err := NewIOCP()
	if err != nil {
		return nil, "", err
	}
	return d, "", nil
}
