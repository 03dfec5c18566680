package clock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/clock"
)

// A channel timer that fired but whose value nobody received is stopped
// in time, as with Go's timers: Stop discards the value and reports true,
// and nothing arrives afterwards. (Code that pools stopped timers relies on
// it: a stale value would fire the timer's next use early.)
func TestFakeStopAfterFiringDiscardsTheValue(t *testing.T) {
	c := clock.NewFake(time.Unix(0, 0))
	tm := c.NewTimer(time.Second)
	c.Advance(time.Second)
	if !tm.Stop() {
		t.Fatal("Stop of a fired, unreceived timer = false; Go's timers report true")
	}
	select {
	case v := <-tm.C():
		t.Fatalf("a stopped timer delivered %v", v)
	default:
	}
	if tm.Stop() {
		t.Fatal("a second Stop = true; nothing was left to stop")
	}
}

// Reset after firing discards the stale value and reports the timer was
// pending, so the reset timer fires only at its new deadline.
func TestFakeResetAfterFiringDiscardsTheValue(t *testing.T) {
	c := clock.NewFake(time.Unix(0, 0))
	tm := c.NewTimer(time.Second)
	c.Advance(time.Second)
	if !tm.Reset(time.Minute) {
		t.Fatal("Reset of a fired, unreceived timer = false; Go's timers report true")
	}
	select {
	case v := <-tm.C():
		t.Fatalf("the reset timer delivered the stale value %v", v)
	default:
	}
	c.Advance(time.Minute)
	select {
	case <-tm.C():
	default:
		t.Fatal("the reset timer did not fire at its new deadline")
	}
}

// Stop racing Advance never lets a value arrive after Stop returned: the
// value is delivered under the clock's lock, so Stop either comes first
// (the timer never fires) or finds the value and discards it.
func TestFakeStopRacingAdvance(t *testing.T) {
	for i := 0; i < 2000; i++ {
		c := clock.NewFake(time.Unix(0, 0))
		tm := c.NewTimer(time.Second)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); c.Advance(time.Second) }()
		stopped := make(chan bool, 1)
		go func() { defer wg.Done(); stopped <- tm.Stop() }()
		wg.Wait()
		<-stopped
		select {
		case v := <-tm.C():
			t.Fatalf("round %d: a value (%v) arrived after Stop returned", i, v)
		default:
		}
	}
}
