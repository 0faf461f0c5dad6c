package main

import (
	"os"
	"runtime"
	"testing"
)

func TestGOMAXPROCSCappedUnlessTheEnvironmentSetsIt(t *testing.T) {
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		t.Skip("GOMAXPROCS is set in the environment: the core leaves it alone")
	}
	if got := runtime.GOMAXPROCS(0); got != coreMaxProcs {
		t.Fatalf("GOMAXPROCS = %d, want %d (NumCPU %d)", got, coreMaxProcs, runtime.NumCPU())
	}
}

func TestSchedTickYieldsAtMostOncePerInterval(t *testing.T) {
	if !schedTickOn {
		t.Skip("FARCE_SCHED_TICK=0")
	}
	var tick schedTick
	tick.last.Store(nanotime() - 2*int64(schedTickEvery))
	tick.refresh()
	first := tick.last.Load()
	if nanotime()-first > int64(schedTickEvery) {
		t.Fatal("an overdue tick did not record its time")
	}
	tick.refresh()
	if tick.last.Load() != first {
		t.Fatal("a second call within the interval yielded again")
	}
}
