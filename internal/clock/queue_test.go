package clock_test

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/internal/clock"
	"github.com/MrVSiK/gotry/internal/clock/fakeclock"
)

// recorder collects the names of entries as they fire.
type recorder struct {
	mu    sync.Mutex
	fired []string
	ch    chan string
}

func newRecorder() *recorder { return &recorder{ch: make(chan string, 64)} }

func (r *recorder) entry(name string) *clock.Entry {
	return &clock.Entry{F: func() {
		r.mu.Lock()
		r.fired = append(r.fired, name)
		r.mu.Unlock()
		r.ch <- name
	}}
}

// next waits (generously, in real time) for the next entry to fire.
func (r *recorder) next(t *testing.T) string {
	t.Helper()
	select {
	case name := <-r.ch:
		return name
	case <-time.After(10 * time.Second):
		t.Fatal("no entry fired")
		return ""
	}
}

// expect waits for the next entry to fire and checks it is want.
func (r *recorder) expect(t *testing.T, want string) {
	t.Helper()
	if got := r.next(t); got != want {
		t.Fatalf("fired %s, want %s", got, want)
	}
}

// none checks that no entry fires within a short real-time wait.
func (r *recorder) none(t *testing.T) {
	t.Helper()
	select {
	case name := <-r.ch:
		t.Fatalf("%s fired", name)
	case <-time.After(20 * time.Millisecond):
	}
}

// TestQueuesFireInDeadlineOrder: entries of several durations fire at their
// own deadlines, in order, and not before.
func TestQueuesFireInDeadlineOrder(t *testing.T) {
	fc := fakeclock.New(time.Unix(1000, 0))
	qs := clock.NewQueues(fc)
	r := newRecorder()
	qs.Arm(r.entry("30ms"), 30*time.Millisecond)
	qs.Arm(r.entry("10ms"), 10*time.Millisecond)
	qs.Arm(r.entry("20ms"), 20*time.Millisecond)
	fc.Advance(9 * time.Millisecond)
	r.none(t)
	for _, want := range []string{"10ms", "20ms", "30ms"} {
		fc.Advance(10 * time.Millisecond)
		r.expect(t, want)
	}
	r.none(t)
}

// TestQueuesStop: a stopped entry never fires and Stop reports true; Stop on
// an entry that fired reports false; a stopped entry can be armed again.
func TestQueuesStop(t *testing.T) {
	fc := fakeclock.New(time.Unix(1000, 0))
	qs := clock.NewQueues(fc)
	r := newRecorder()
	a, b := r.entry("a"), r.entry("b")
	qs.Arm(a, 10*time.Millisecond)
	qs.Arm(b, 10*time.Millisecond)
	if !a.Stop() {
		t.Fatal("Stop of a pending entry reported false")
	}
	if a.Stop() {
		t.Fatal("a second Stop reported true")
	}
	fc.Advance(10 * time.Millisecond)
	r.expect(t, "b")
	r.none(t)
	if b.Stop() {
		t.Fatal("Stop of a fired entry reported true")
	}
	qs.Arm(a, 5*time.Millisecond) // re-armed after its Stop
	fc.Advance(5 * time.Millisecond)
	r.expect(t, "a")
	var never clock.Entry
	if never.Stop() {
		t.Fatal("Stop of an entry never armed reported true")
	}
}

// TestQueuesCollidingDurations: durations whose hashes pick one slot (1s
// and 5s do) each get lists of their own; once every slot is taken, a new
// duration's entries are timers of their own, and every entry still fires
// at its deadline, in order.
func TestQueuesCollidingDurations(t *testing.T) {
	if clock.SlotOf(time.Second) != clock.SlotOf(5*time.Second) {
		t.Fatal("1s and 5s no longer share a slot: pick another colliding pair")
	}
	fc := fakeclock.New(time.Unix(1000, 0))
	qs := clock.NewQueues(fc)
	r := newRecorder()
	qs.Arm(r.entry("5s"), 5*time.Second)
	qs.Arm(r.entry("1s"), time.Second)
	if n := qs.Lists(); n != 2 {
		t.Fatalf("%d durations with lists, want 2", n)
	}
	fc.Advance(time.Second)
	r.expect(t, "1s")
	fc.Advance(4 * time.Second)
	r.expect(t, "5s")

	// 40 more durations, one entry each, armed longest first: 32 slots
	// hold lists, the rest are timers of their own.
	for i := 40; i >= 1; i-- {
		qs.Arm(r.entry(time.Duration(i*100*int(time.Microsecond)).String()), time.Duration(i)*100*time.Microsecond)
	}
	if n := qs.Lists(); n != 32 {
		t.Fatalf("%d durations with lists, want all 32 slots", n)
	}
	for i := 1; i <= 40; i++ {
		fc.Advance(100 * time.Microsecond)
		r.expect(t, (time.Duration(i) * 100 * time.Microsecond).String())
	}
	r.none(t)
}

// TestQueuesIdleThenBusy: a list whose every entry was stopped has its
// timer fire once for nothing; an entry armed afterwards still fires.
func TestQueuesIdleThenBusy(t *testing.T) {
	fc := fakeclock.New(time.Unix(1000, 0))
	qs := clock.NewQueues(fc)
	r := newRecorder()
	a := r.entry("a")
	qs.Arm(a, 10*time.Millisecond)
	a.Stop()
	fc.Advance(10 * time.Millisecond) // the list's timer fires for nothing
	r.none(t)
	qs.Arm(r.entry("b"), 10*time.Millisecond)
	fc.Advance(10 * time.Millisecond)
	r.expect(t, "b")
}

// TestQueuesOfAFakeClockUsesItsTimers: on a fake clock the engine's Queues
// gives every entry a timer of that clock, so tests can count them.
func TestQueuesOfAFakeClockUsesItsTimers(t *testing.T) {
	fc := fakeclock.New(time.Unix(1000, 0))
	qs := clock.QueuesOf(fc)
	r := newRecorder()
	a, b := r.entry("a"), r.entry("b")
	qs.Arm(a, time.Second)
	qs.Arm(b, time.Second)
	if n := fc.Pending(); n != 2 {
		t.Fatalf("%d fake timers pending, want one per entry", n)
	}
	if !a.Stop() {
		t.Fatal("Stop reported false")
	}
	fc.Advance(time.Second)
	r.expect(t, "b")
	if a, b := clock.QueuesOf(clock.Real()), clock.QueuesOf(clock.Real()); a != b {
		t.Fatal("the real clock's Queues is not shared")
	}
}

// TestQueuesConcurrentArmStop, on the real clock and under -race: entries
// armed and stopped from many goroutines, with deadlines from 0 to 2ms, each
// either fire exactly once or are stopped (Stop true), never both, never
// neither.
func TestQueuesConcurrentArmStop(t *testing.T) {
	qs := clock.NewQueues(clock.Real())
	const workers, each = 8, 300
	var fired, stopped atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 1))
			for i := 0; i < each; i++ {
				var n atomic.Int32
				done := make(chan struct{})
				e := &clock.Entry{F: func() {
					if n.Add(1) != 1 {
						t.Error("an entry fired twice")
					}
					close(done)
				}}
				qs.Arm(e, time.Duration(rng.IntN(2000))*time.Microsecond)
				if rng.IntN(2) == 0 {
					time.Sleep(time.Duration(rng.IntN(1500)) * time.Microsecond)
				}
				if e.Stop() {
					stopped.Add(1)
					if n.Load() != 0 {
						t.Error("Stop reported true for an entry that fired")
					}
					continue
				}
				select { // it fired, or is about to
				case <-done:
					fired.Add(1)
				case <-time.After(10 * time.Second):
					t.Error("Stop reported false and the entry never fired")
					return
				}
			}
		}(uint64(w))
	}
	wg.Wait()
	if fired.Load()+stopped.Load() != workers*each {
		t.Fatalf("fired %d + stopped %d != %d", fired.Load(), stopped.Load(), workers*each)
	}
	t.Logf("fired %d, stopped %d", fired.Load(), stopped.Load())
}
