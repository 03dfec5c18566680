package periodic_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/MrVSiK/gotry/internal/clock/fakeclock"
	"github.com/MrVSiK/gotry/internal/testwait"
	"github.com/MrVSiK/gotry/resilience/periodic"
)

// waitLimit bounds every real-time wait in these tests; see testwait.
const waitLimit = testwait.Limit

var epoch = testwait.Epoch

func waitArmed(t *testing.T, clk *fakeclock.Clock, n int) {
	t.Helper()
	if !clk.WaitForArmed(n, waitLimit) {
		t.Fatalf("timed out waiting for timer #%d to be armed (armed: %d)", n, clk.Armed())
	}
}

// drawMin and drawMax pin the jitter draws to the ends of [0, n), so a pause
// lands on either end of its closed range [interval, interval+jitter].
func drawMin(int64) int64   { return 0 }
func drawMax(n int64) int64 { return n - 1 }

// fixedDraw pins every jitter draw to v (which must not exceed the jitter).
func fixedDraw(v time.Duration) func(int64) int64 {
	return func(int64) int64 { return int64(v) }
}

func mustPeriodic(t *testing.T, interval, jitter, timeout time.Duration, task func(context.Context) error, opts ...periodic.Option) *periodic.Periodic {
	t.Helper()
	p, err := periodic.New(interval, jitter, timeout, task, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

func TestNewRejectsInvalidArguments(t *testing.T) {
	task := func(context.Context) error { return nil }
	tests := []struct {
		name                      string
		interval, jitter, timeout time.Duration
		task                      func(context.Context) error
		option                    string
	}{
		{"zero interval", 0, 0, 0, task, "interval"},
		{"negative interval", -time.Second, 0, 0, task, "interval"},
		{"negative jitter", time.Second, -1, 0, task, "jitter"},
		{"negative timeout", time.Second, 0, -1, task, "timeout"},
		{"nil task", time.Second, 0, 0, nil, "task"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := periodic.New(tt.interval, tt.jitter, tt.timeout, tt.task)
			var ce *periodic.ConfigError
			if !errors.As(err, &ce) || ce.Config != "periodic.New" || ce.Option != tt.option {
				t.Fatalf("New error = %v, want a *ConfigError naming periodic.New and %q", err, tt.option)
			}
		})
	}
}

func TestPeriodicFirstCallIsImmediate(t *testing.T) {
	clk := fakeclock.New(epoch)
	calls := make(chan time.Time, 8)
	p := mustPeriodic(t, time.Minute, 10*time.Second, 0, func(context.Context) error {
		calls <- clk.Now()
		return nil
	}, periodic.WithClock(clk))
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	if at := testwait.Recv(t, calls, "the first call"); !at.Equal(epoch) {
		t.Errorf("first call at %v, want %v with no time passing", at.Sub(epoch), time.Duration(0))
	}
}

func TestPeriodicWithInitialJitterDelaysFirstCall(t *testing.T) {
	const jitter, draw = 10 * time.Second, 7 * time.Second
	clk := fakeclock.New(epoch)
	calls := make(chan time.Time, 8)
	p := mustPeriodic(t, time.Minute, jitter, 0, func(context.Context) error {
		calls <- clk.Now()
		return nil
	}, periodic.WithInitialJitter(), periodic.WithClock(clk), periodic.WithRand(fixedDraw(draw)))
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Stop()

	waitArmed(t, clk, 1)
	clk.Advance(draw - time.Nanosecond)
	testwait.None(t, calls, "call before the initial jitter elapsed")
	clk.Advance(time.Nanosecond)
	if at := testwait.Recv(t, calls, "the first call"); at.Sub(epoch) != draw {
		t.Errorf("first call after %v, want %v", at.Sub(epoch), draw)
	}
}

func TestPeriodicSpacingIsIntervalPlusJitter(t *testing.T) {
	const interval, jitter = time.Minute, 10 * time.Second
	tests := []struct {
		name string
		draw func(int64) int64
		gap  time.Duration
	}{
		{"smallest jitter", drawMin, interval},
		{"largest jitter", drawMax, interval + jitter},
		{"middle jitter", fixedDraw(3 * time.Second), interval + 3*time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := fakeclock.New(epoch)
			calls := make(chan time.Time, 8)
			p := mustPeriodic(t, interval, jitter, 0, func(context.Context) error {
				calls <- clk.Now()
				return nil
			}, periodic.WithClock(clk), periodic.WithRand(tt.draw))
			if err := p.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer p.Stop()

			prev := testwait.Recv(t, calls, "the first call")
			for n := 1; n <= 3; n++ {
				waitArmed(t, clk, n) // the pause after call n has begun
				clk.Advance(tt.gap - time.Nanosecond)
				testwait.None(t, calls, "call before the pause ended")
				clk.Advance(time.Nanosecond)
				at := testwait.Recv(t, calls, "the next call")
				if got := at.Sub(prev); got != tt.gap {
					t.Errorf("call %d came %v after call %d, want %v", n+1, got, n, tt.gap)
				}
				prev = at
			}
		})
	}
}

func TestPeriodicTimeoutCancelsTheCall(t *testing.T) {
	const timeout = 5 * time.Second
	clk := fakeclock.New(epoch)
	started := make(chan struct{}, 8)
	causes := make(chan error, 8)
	reported := make(chan error, 8)
	p := mustPeriodic(t, time.Minute, 0, timeout, func(ctx context.Context) error {
		started <- struct{}{}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	}, periodic.WithClock(clk), periodic.WithErrorHandler(func(err error) { reported <- err }))
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Stop()

	testwait.Recv(t, started, "the first call")
	waitArmed(t, clk, 1) // the call's timeout
	clk.Advance(timeout - time.Nanosecond)
	testwait.None(t, causes, "cancellation before the timeout")
	clk.Advance(time.Nanosecond)

	cause := testwait.Recv(t, causes, "the call's cancellation")
	if !errors.Is(cause, periodic.ErrTimeout) || !errors.Is(cause, context.DeadlineExceeded) {
		t.Errorf("context.Cause = %v, want one matching ErrTimeout and DeadlineExceeded", cause)
	}
	err := testwait.Recv(t, reported, "the reported timeout")
	for _, target := range []error{periodic.ErrTimeout, context.DeadlineExceeded, context.Canceled} {
		if !errors.Is(err, target) {
			t.Errorf("reported error %v does not match %v", err, target)
		}
	}
	// The loop goes on: the pause after the call starts.
	waitArmed(t, clk, 2)
	clk.Advance(time.Minute)
	testwait.Recv(t, started, "the call after the timed-out one")
}

func TestPeriodicReportsTaskErrorsUnchanged(t *testing.T) {
	errFlaky := errors.New("flaky")
	clk := fakeclock.New(epoch)
	reported := make(chan error, 8)
	p := mustPeriodic(t, time.Minute, 0, time.Hour, func(context.Context) error { return errFlaky },
		periodic.WithClock(clk), periodic.WithErrorHandler(func(err error) { reported <- err }))
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	if err := testwait.Recv(t, reported, "the task's error"); err != errFlaky {
		t.Errorf("reported %v, want the task's error itself", err)
	}
}

func TestPeriodicRecoversPanicAndCarriesOn(t *testing.T) {
	errBoom := errors.New("boom error")
	tests := []struct {
		name  string
		value any
		match error // an error the report must also match
	}{
		{"string value", "boom", periodic.ErrPanic},
		{"error value", errBoom, errBoom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := fakeclock.New(epoch)
			var n atomic.Int32
			calls := make(chan int32, 8)
			reported := make(chan error, 8)
			p := mustPeriodic(t, time.Minute, 0, 0, func(context.Context) error {
				calls <- n.Add(1)
				if n.Load() == 1 {
					panic(tt.value)
				}
				return nil
			}, periodic.WithClock(clk), periodic.WithErrorHandler(func(err error) { reported <- err }))
			if err := p.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer p.Stop()

			testwait.Recv(t, calls, "the panicking call")
			err := testwait.Recv(t, reported, "the panic report")
			var pe *periodic.PanicError
			switch {
			case !errors.Is(err, periodic.ErrPanic) || !errors.Is(err, tt.match):
				t.Errorf("reported %v, want it to match ErrPanic and %v", err, tt.match)
			case !errors.As(err, &pe) || pe.Value != tt.value:
				t.Errorf("reported %#v, want a *PanicError holding %v", err, tt.value)
			case !strings.Contains(err.Error(), "periodic_test.go"):
				t.Errorf("report lacks the panicking stack:\n%v", err)
			}
			waitArmed(t, clk, 1)
			clk.Advance(time.Minute)
			if got := testwait.Recv(t, calls, "the call after the panic"); got != 2 {
				t.Errorf("call number %d after the panic, want 2", got)
			}
		})
	}
}

func TestPeriodicStopWaitsForTheCallAndLeavesNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	clk := fakeclock.New(epoch)
	started := make(chan struct{}, 1)
	var returned atomic.Bool
	reported := make(chan error, 8)
	p := mustPeriodic(t, time.Minute, 0, time.Hour, func(ctx context.Context) error {
		started <- struct{}{}
		<-ctx.Done()
		returned.Store(true)
		return ctx.Err()
	}, periodic.WithClock(clk), periodic.WithErrorHandler(func(err error) { reported <- err }))
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testwait.Recv(t, started, "the call")
	p.Stop()
	if !returned.Load() {
		t.Error("Stop returned before the call in progress did")
	}
	select {
	case <-p.Done():
	default:
		t.Error("Done is not closed after Stop")
	}
	testwait.None(t, reported, "report of the cancellation Stop caused")
	p.Stop() // idempotent
	if err := p.Start(context.Background()); !errors.Is(err, periodic.ErrStarted) {
		t.Errorf("Start after Stop = %v, want ErrStarted", err)
	}
}

func TestPeriodicParentCancelEndsLoopAfterCurrentCall(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	clk := fakeclock.New(epoch)
	started := make(chan struct{}, 8)
	release := make(chan struct{})
	p := mustPeriodic(t, time.Minute, 0, 0, func(context.Context) error {
		started <- struct{}{}
		<-release // ignores its context on purpose
		return nil
	}, periodic.WithClock(clk))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	testwait.Recv(t, started, "the call")
	cancel()
	testwait.None(t, p.Done(), "loop exit while the call is still running")
	close(release)
	testwait.Recv(t, p.Done(), "the loop to exit")
	testwait.None(t, started, "call after the context ended")
	p.Stop() // returns at once: the loop is gone
}

func TestPeriodicStartMisuse(t *testing.T) {
	task := func(context.Context) error { return nil }
	clk := fakeclock.New(epoch)

	p := mustPeriodic(t, time.Minute, 0, 0, task, periodic.WithClock(clk))
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); !errors.Is(err, periodic.ErrStarted) {
		t.Errorf("second Start = %v, want ErrStarted", err)
	}
	p.Stop()

	q := mustPeriodic(t, time.Minute, 0, 0, task, periodic.WithClock(clk))
	//lint:ignore SA1012 a nil context is exactly what is being tested
	if err := q.Start(nil); err == nil { //nolint:staticcheck
		t.Error("Start(nil) succeeded")
	}
	q.Stop()
	select {
	case <-q.Done():
	default:
		t.Error("Done is not closed after Stop before Start")
	}
	if err := q.Start(context.Background()); !errors.Is(err, periodic.ErrStarted) {
		t.Errorf("Start after Stop = %v, want ErrStarted", err)
	}
}
