package clock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/internal/clock"
	"github.com/MrVSiK/gotry/internal/clock/fakeclock"
)

// waitSecond waits (in real time, generously) until s reports want; the
// refresh runs on the timer's own goroutine, after Advance returns.
func waitSecond(t *testing.T, s *clock.Seconds, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Unix() != want {
		if time.Now().After(deadline) {
			t.Fatalf("Unix() = %d, want %d", s.Unix(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSecondsFollowsTheClock(t *testing.T) {
	start := time.Unix(1000, 400e6) // 0.6 s before the next second
	fc := fakeclock.New(start)
	s := clock.NewSeconds(fc)
	if got := s.Unix(); got != 1000 {
		t.Fatalf("first read = %d, want 1000", got)
	}
	if !fc.WaitForTimers(1, 5*time.Second) {
		t.Fatal("no refresh armed after the first read")
	}
	fc.Advance(599 * time.Millisecond) // still second 1000
	if got := s.Unix(); got != 1000 {
		t.Fatalf("before the boundary = %d, want 1000", got)
	}
	fc.Advance(time.Millisecond) // the boundary: the refresh fires
	waitSecond(t, s, 1001)
	// Read during every second: it keeps ticking, one refresh per second.
	for want := int64(1002); want <= 1005; want++ {
		if !fc.WaitForTimers(1, 5*time.Second) {
			t.Fatal("refresh not re-armed while in use")
		}
		fc.Advance(time.Second)
		waitSecond(t, s, want)
	}
}

func TestSecondsStopsWhenUnused(t *testing.T) {
	fc := fakeclock.New(time.Unix(2000, 0))
	s := clock.NewSeconds(fc)
	s.Unix()
	if !fc.WaitForTimers(1, 5*time.Second) {
		t.Fatal("no refresh armed")
	}
	fc.Advance(time.Second) // refresh 1: it was read during second 2000, so it re-arms
	if !fc.WaitForArmed(2, 5*time.Second) {
		t.Fatal("refresh not re-armed after a used second")
	}
	fc.Advance(time.Second) // refresh 2: nobody read during second 2001: it stops
	deadline := time.Now().Add(10 * time.Second)
	for s.Ticking() {
		if time.Now().After(deadline) {
			t.Fatal("the refresh kept ticking with no readers")
		}
		time.Sleep(time.Millisecond)
	}
	// The clock moved on while stopped; the next read is exact again.
	fc.Advance(5 * time.Second)
	if got := s.Unix(); got != 2007 {
		t.Fatalf("read after a pause = %d, want 2007", got)
	}
	if !fc.WaitForTimers(1, 5*time.Second) {
		t.Fatal("a read after a pause did not restart the refresh")
	}
}

func TestSecondsOfSharesTheRealOne(t *testing.T) {
	if a, b := clock.SecondsOf(clock.Real()), clock.SecondsOf(clock.Real()); a != b {
		t.Error("the real clock's Seconds is not shared")
	}
	fc := fakeclock.New(time.Unix(0, 0))
	direct := clock.SecondsOf(fc)
	if direct.Unix() != 0 || fc.Pending() != 0 {
		t.Error("a fake clock's Seconds armed a timer of its own")
	}
	fc.Advance(3 * time.Second)
	if got := direct.Unix(); got != 3 {
		t.Errorf("a fake clock's Seconds = %d after 3 s, want 3", got)
	}
	now := time.Now().Unix()
	if got := clock.SecondsOf(clock.Real()).Unix(); got < now-1 || got > now+1 {
		t.Errorf("real Seconds = %d, time.Now = %d", got, now)
	}
}

// TestSecondsReadSaysWhenItReadTheClock: Read reports the exact time when
// finding the second took a read of the clock (the first read, which
// starts the refresh; every read of a fake clock's SecondsOf), and only
// then, so a caller that wants the exact time too reads the clock at most
// once; Coarse answers alone once the refresh runs and the second was read.
func TestSecondsReadSaysWhenItReadTheClock(t *testing.T) {
	start := time.Unix(3000, 250e6)
	fc := fakeclock.New(start)
	s := clock.NewSeconds(fc)
	if _, ok := s.Coarse(); ok {
		t.Fatal("Coarse answered before anything started the refresh")
	}
	if sec, now, exact := s.Read(); sec != 3000 || !exact || !now.Equal(start) {
		t.Fatalf("first Read = %d, %v, %v; want 3000 and the clock's time, read", sec, now, exact)
	}
	if sec, ok := s.Coarse(); !ok || sec != 3000 {
		t.Fatalf("Coarse after the first read = %d, %v; want 3000 from the refresh", sec, ok)
	}
	if !fc.WaitForTimers(1, 5*time.Second) {
		t.Fatal("no refresh armed")
	}
	fc.Advance(750 * time.Millisecond) // the boundary: the refresh publishes 3001
	waitSecond(t, s, 3001)
	if sec, _, exact := s.Read(); sec != 3001 || exact {
		t.Fatalf("Read while refreshed = %d, exact %v; want 3001 with no read of the clock", sec, exact)
	}

	direct := clock.SecondsOf(fc)
	fc.Advance(400 * time.Millisecond)
	if _, ok := direct.Coarse(); ok {
		t.Fatal("a fake clock's SecondsOf answered without reading the clock")
	}
	if sec, now, exact := direct.Read(); sec != 3001 || !exact || !now.Equal(fc.Now()) {
		t.Fatalf("a fake clock's Read = %d, %v, %v; want 3001 and the clock's time, read", sec, now, exact)
	}
}

// TestSecondsStartsOnce: readers that find the refresh stopped all read
// the clock, but only one of them arms the refresh timer.
func TestSecondsStartsOnce(t *testing.T) {
	fc := fakeclock.New(time.Unix(4000, 0))
	s := clock.NewSeconds(fc)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := s.Unix(); got != 4000 {
				t.Errorf("Unix() = %d, want 4000", got)
			}
		}()
	}
	wg.Wait()
	if n := fc.Armed(); n != 1 {
		t.Fatalf("%d refresh timers armed by 8 concurrent first reads, want 1", n)
	}
	// Stopped again (a second with no reader), it restarts once, reusing
	// its timer.
	fc.Advance(time.Second) // used during 4000: re-armed
	if !fc.WaitForArmed(2, 5*time.Second) {
		t.Fatal("refresh not re-armed")
	}
	fc.Advance(time.Second) // unused during 4001: stops
	deadline := time.Now().Add(10 * time.Second)
	for s.Ticking() {
		if time.Now().After(deadline) {
			t.Fatal("the refresh kept ticking with no readers")
		}
		time.Sleep(time.Millisecond)
	}
	s.Unix()
	s.Unix()
	if n, p := fc.Armed(), fc.Pending(); n != 3 || p != 1 {
		t.Fatalf("after a restart: %d timers ever armed, %d pending; want 3 and 1", n, p)
	}
}

func BenchmarkSecondsUnix(b *testing.B) {
	s := clock.SecondsOf(clock.Real())
	b.ReportAllocs()
	for b.Loop() {
		s.Unix()
	}
}

func BenchmarkTimeNow(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		time.Now()
	}
}
