package schedule_test

import (
	"fmt"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/resilience/schedule"
)

func ExampleSchedule() {
	s, err := schedule.New(schedule.Config{
		Base:     100 * time.Millisecond,
		Factor:   2,
		MaxDelay: time.Second,
		// Jitter is left at 0 so the output is predictable; real code
		// sets it, or picks JitterFull.
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 6 {
		fmt.Println(s.Next()) // a retry loop would sleep this long
	}
	s.Reset() // after a success
	fmt.Println("after Reset:", s.Next())
	// Output:
	// 100ms
	// 200ms
	// 400ms
	// 800ms
	// 1s
	// 1s
	// after Reset: 100ms
}

// A Schedule is also a resilience.Backoff: Delay computes the delay from the
// retry number alone, so one Schedule serves any number of concurrent calls
// of the attempt engine, the transport or a Retrier.
func ExampleSchedule_Delay() {
	s, err := schedule.New(schedule.Config{Base: 100 * time.Millisecond, MaxDelay: 5 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	var b resilience.Backoff = s
	for retry := 1; retry <= 8; retry *= 2 {
		fmt.Printf("retry %d: %v\n", retry, b.Delay(retry, 0))
	}
	// Output:
	// retry 1: 100ms
	// retry 2: 200ms
	// retry 4: 800ms
	// retry 8: 5s
}

func ExampleNew_fullJitter() {
	// Full jitter spreads clients that fail together the furthest: each
	// delay is drawn from [0, d], d being Base·2^(n−1) capped at MaxDelay.
	s, err := schedule.New(schedule.Config{
		Base:     100 * time.Millisecond,
		MaxDelay: 10 * time.Second,
		Strategy: schedule.JitterFull,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	d := s.Delay(3, 0)
	fmt.Println(d >= 0 && d <= 400*time.Millisecond)
	// Output: true
}

func ExampleNew_invalid() {
	_, err := schedule.New(schedule.Config{Base: time.Second, MaxDelay: time.Millisecond})
	fmt.Println(err)
	// Output: schedule: Config: MaxDelay 1ms is below Base 1s
}

func ExampleAddJitter() {
	// Pace a poll at one minute plus up to five seconds, so a fleet of
	// pollers does not fire in lockstep.
	d := schedule.AddJitter(time.Minute, 5*time.Second)
	fmt.Println(d >= time.Minute && d <= time.Minute+5*time.Second)
	// Output: true
}
