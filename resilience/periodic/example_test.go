package periodic_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/MrVSiK/gotry/resilience/periodic"
)

func ExamplePeriodic() {
	calls := 0
	third := make(chan struct{})
	refresh := func(ctx context.Context) error {
		calls++
		switch calls {
		case 2:
			return errors.New("upstream unavailable")
		case 3:
			close(third)
		}
		return nil
	}
	p, err := periodic.New(
		10*time.Millisecond, // pause between calls
		5*time.Millisecond,  // plus up to this much jitter
		time.Second,         // each call's timeout
		refresh,
		periodic.WithErrorHandler(func(err error) { fmt.Println("refresh failed:", err) }),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := p.Start(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	<-third
	p.Stop() // waits for the loop to exit
	fmt.Println("stopped")
	// Output:
	// refresh failed: upstream unavailable
	// stopped
}

// A panicking task does not crash the program: the loop recovers it, hands
// the error handler a *PanicError and carries on.
func ExampleWithErrorHandler() {
	reported := make(chan error, 1)
	p, err := periodic.New(time.Hour, 0, 0,
		func(context.Context) error { panic("bug in the task") },
		periodic.WithErrorHandler(func(err error) {
			select {
			case reported <- err:
			default:
			}
		}),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := p.Start(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	err = <-reported // the first call is made at once
	p.Stop()
	var pe *periodic.PanicError
	fmt.Println(errors.Is(err, periodic.ErrPanic), errors.As(err, &pe) && pe.Value == "bug in the task")
	// Output: true true
}
