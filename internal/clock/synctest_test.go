package clock_test

import (
	"os"
	"os/exec"
	"testing"
	"testing/synctest"
	"time"

	"github.com/MrVSiK/gotry/internal/clock"
)

// nearWall fails the test unless sec is the wall clock's current second
// (give or take one: the refresh may lag).
func nearWall(t *testing.T, what string, sec int64) {
	t.Helper()
	if now := time.Now().Unix(); sec < now-1 || sec > now+1 {
		t.Errorf("%s = %d, the wall clock's second is %d", what, sec, now)
	}
}

// In a synctest bubble the real clock is the bubble's: SecondsOf gives an
// engine made there a Seconds that reads it, so the budget counts the
// bubble's seconds, and the process's shared Seconds is not touched.
func TestSecondsOfInABubbleReadsTheBubblesTime(t *testing.T) {
	shared := clock.SecondsOf(clock.Real())
	nearWall(t, "the shared second", shared.Unix()) // ticking on the wall clock
	synctest.Test(t, func(t *testing.T) {
		s := clock.SecondsOf(clock.Real())
		if s == shared {
			t.Fatal("SecondsOf in a bubble returned the process's shared Seconds")
		}
		for range 3 {
			if got, want := s.Unix(), time.Now().Unix(); got != want {
				t.Errorf("Unix() = %d in the bubble, its clock reads %d", got, want)
			}
			time.Sleep(time.Second)
		}
	})
	nearWall(t, "the shared second after the bubble", shared.Unix())
}

// A bubble that uses gotry and then idles for a few (virtual) seconds, as
// a test may, must leave nothing of the shared Seconds behind. Before the
// fix its refresh timer, first made in the bubble, stopped there, and the
// next read outside reset it: a fatal error of the runtime ("reset of
// synctest timer from outside bubble") that ended the test binary. The
// bubble must be the first to use the shared Seconds in its process, so
// the test runs in a process of its own.
func TestSharedSecondsOutlivesABubbleThatIdled(t *testing.T) {
	const child = "GOTRY_CLOCK_BUBBLE_FIRST"
	if os.Getenv(child) == "1" {
		synctest.Test(t, func(t *testing.T) {
			_ = clock.SecondsOf(clock.Real()).Unix()
			time.Sleep(5 * time.Second)
		})
		nearWall(t, "the shared second after an idle bubble", clock.SecondsOf(clock.Real()).Unix())
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSharedSecondsOutlivesABubbleThatIdled$", "-test.count=1")
	cmd.Env = append(os.Environ(), child+"=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("a process whose first use of the shared Seconds was in a bubble: %v\n%s", err, out)
	}
}

// The shared Seconds read from a bubble (an engine made outside one and
// used inside, which gotry does not support, but which must not break the
// rest of the process) answers from the bubble's clock and does not arm
// its timer there: armed from a bubble, the timer would be scheduled for
// the bubble's time on the wall clock's heap, never fire, and freeze the
// process's second at the bubble's.
func TestSharedSecondsReadInABubbleDoesNotArm(t *testing.T) {
	shared := clock.SecondsOf(clock.Real())
	// Let its refresh stop: nobody in this binary reads it meanwhile.
	deadline := time.Now().Add(10 * time.Second)
	for shared.Ticking() {
		if time.Now().After(deadline) {
			t.Fatal("the shared Seconds kept ticking unread")
		}
		time.Sleep(50 * time.Millisecond)
	}
	synctest.Test(t, func(t *testing.T) {
		if got, want := shared.Unix(), time.Now().Unix(); got != want {
			t.Errorf("shared Unix() = %d in the bubble, its clock reads %d", got, want)
		}
		if shared.Ticking() {
			t.Error("a read in a bubble armed the shared refresh")
		}
	})
	nearWall(t, "the shared second after the bubble", shared.Unix())
	if !shared.Ticking() {
		t.Error("a read outside the bubble did not restart the refresh")
	}
}
