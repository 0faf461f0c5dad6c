package main

import (
	"os"
	"os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// On one CPU Go's default is one P, which the core raises to two: the test
// binary runs again with its affinity cut to one CPU (a child inherits the
// affinity of the thread that starts it), where the test above checks it.
func TestGOMAXPROCSIsTwoOnOneCPU(t *testing.T) {
	if os.Getenv("FARCE_TEST_ONE_CPU") == "1" {
		if runtime.NumCPU() != 1 {
			t.Fatalf("NumCPU = %d with the affinity cut to one CPU", runtime.NumCPU())
		}
		return // TestGOMAXPROCSCappedUnlessTheEnvironmentSetsIt checks the value in this run
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		t.Skip("GOMAXPROCS is set in the environment: the core leaves it alone")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var was unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		t.Fatal(err)
	}
	var one unix.CPUSet
	for cpu := 0; cpu < 1024; cpu++ {
		if was.IsSet(cpu) {
			one.Set(cpu)
			break
		}
	}
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	defer unix.SchedSetaffinity(0, &was)
	cmd := exec.Command(os.Args[0], "-test.run=^(TestGOMAXPROCSIsTwoOnOneCPU|TestGOMAXPROCSCappedUnlessTheEnvironmentSetsIt)$", "-test.v")
	cmd.Env = append(os.Environ(), "FARCE_TEST_ONE_CPU=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("on one CPU: %v\n%s", err, out)
	}
}
