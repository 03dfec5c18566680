package periodic

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/MrVSiK/gotry/clock"
	"github.com/MrVSiK/gotry/internal/jitter"
	"github.com/MrVSiK/gotry/internal/kiterr"
)

// ErrPanic marks the error that stands for a panic in the task. The error is
// a *PanicError; match it with errors.Is.
var ErrPanic = errors.New("periodic: task panicked")

// ErrTimeout marks the error of a call cut off by its per-call timeout. Such
// an error also matches context.DeadlineExceeded and wraps the error the task
// returned. It is also the cause (see context.Cause) of the cancelled call
// context.
var ErrTimeout = errors.New("periodic: task timed out")

// ErrStarted is returned by Periodic.Start when the Periodic was already
// started or stopped. A Periodic runs at most once.
var ErrStarted = errors.New("periodic: already started or stopped")

// PanicError is the error that replaces a panic recovered from the task. Its
// fields are Value, the value passed to panic, and Stack, the panicking
// goroutine's stack trace at the point of recovery. It matches ErrPanic, and
// unwraps to Value when Value is an error. (The type is shared with package
// cache, whose panics match cache.ErrPanic instead.)
type PanicError = kiterr.PanicError

// ConfigError is the error New returns for an invalid argument: Config is
// "periodic.New", Option the argument's name and Reason what is wrong with
// it. Find it with errors.As. (The type is shared with the other kit
// packages.)
type ConfigError = kiterr.ConfigError

// taskTimeoutError is the error of a call cut off by its timeout, and (with
// a nil err) the cancellation cause of the call's context.
type taskTimeoutError struct {
	timeout time.Duration
	err     error // what the task returned; nil in the cause
}

func (e *taskTimeoutError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("%v after %v", ErrTimeout, e.timeout)
	}
	return fmt.Sprintf("%v after %v: %v", ErrTimeout, e.timeout, e.err)
}

func (e *taskTimeoutError) Unwrap() []error {
	if e.err == nil {
		return []error{ErrTimeout, context.DeadlineExceeded}
	}
	return []error{ErrTimeout, context.DeadlineExceeded, e.err}
}

// Timeout reports true, like other timeouts.
func (e *taskTimeoutError) Timeout() bool { return true }

// Option configures a Periodic. Nil options are ignored.
type Option interface {
	apply(*Periodic)
}

type optionFunc func(*Periodic)

func (f optionFunc) apply(p *Periodic) { f(p) }

// WithInitialJitter delays the first call by a uniform random amount in
// [0, jitter] instead of making it at once. Without it, replicas started
// together (a deploy, a restart) all make their first call together.
func WithInitialJitter() Option {
	return optionFunc(func(p *Periodic) { p.initialJitter = true })
}

// WithErrorHandler sets the function that receives every error a call
// returns, including the *PanicError of a panicking call and the ErrTimeout
// error of one cut off by its timeout. It runs on the loop's
// goroutine, between calls, so it never runs concurrently with itself or the
// task; it delays the next call while it runs, must not call Stop (Stop would
// wait for it), and is not protected against panics. A nil f drops errors,
// which is also the default.
func WithErrorHandler(f func(error)) Option {
	return optionFunc(func(p *Periodic) { p.onError = f })
}

// WithClock sets the clock behind the pauses and the per-call timeout
// (default the wall clock; nil is ignored). A test passes a clock.Fake and
// moves it on instead of sleeping.
func WithClock(c clock.Clock) Option {
	return optionFunc(func(p *Periodic) {
		if c != nil {
			p.clock = c
		}
	})
}

// withRandN sets the random source of the jitter; tests use it
// (export_test.go) to pin the pauses. randN must return a value in [0, n)
// for n > 0.
func withRandN(randN func(n int64) int64) Option {
	return optionFunc(func(p *Periodic) {
		if randN != nil {
			p.randN = randN
		}
	})
}

// Periodic calls a task over and over on one background goroutine, pausing
// interval plus a uniform random amount in [0, jitter] between the end of
// one call and the start of the next. The jitter spreads the calls of many
// replicas apart. Calls never overlap; a slow call pushes the later ones back
// rather than being skipped or doubled up.
//
// By default the first call is made as soon as Start runs the loop, without
// jitter; WithInitialJitter delays it too. Each call gets a context derived
// from the one given to Start and, when timeout is positive, cancelled after
// timeout with a cause matching ErrTimeout and context.DeadlineExceeded.
// (The cancellation is driven by the injected clock, not a context deadline,
// so the call context has no Deadline and its Err is context.Canceled; use
// context.Cause to tell a timeout from a stop.)
//
// A panicking task is recovered: the panic is reported to the error handler
// as a *PanicError and the loop carries on. A task that calls
// runtime.Goexit ends the loop.
//
// Start it once; Stop (or cancelling the context given to Start) ends the
// loop after the call in progress returns. A Periodic's methods are safe for
// concurrent use. It costs one goroutine while running and, per call, one
// context and (with a timeout) one timer.
type Periodic struct {
	interval, jitter, timeout time.Duration
	task                      func(context.Context) error
	initialJitter             bool
	onError                   func(error)
	clock                     clock.Clock
	randN                     func(n int64) int64

	done chan struct{} // closed when the loop has exited, or by Stop before Start

	mu      sync.Mutex         // guards the fields below
	started bool               // Start has run
	stopped bool               // Stop has run
	cancel  context.CancelFunc // ends the loop; nil before Start
}

// New returns a Periodic that calls task every interval plus up to jitter,
// each call limited to timeout. interval must be positive, jitter
// and timeout must not be negative (0 means no jitter and no per-call
// timeout respectively), and task must not be nil; a violation yields a
// *ConfigError naming the argument. Nothing runs until Start.
func New(interval, jitter, timeout time.Duration, task func(context.Context) error, opts ...Option) (*Periodic, error) {
	const name = "periodic.New"
	switch {
	case interval <= 0:
		return nil, kiterr.Configf(name, "interval", "must be positive, got %v", interval)
	case jitter < 0:
		return nil, kiterr.Configf(name, "jitter", "must not be negative, got %v", jitter)
	case timeout < 0:
		return nil, kiterr.Configf(name, "timeout", "must not be negative, got %v", timeout)
	case task == nil:
		return nil, kiterr.Configf(name, "task", "must not be nil")
	}
	p := &Periodic{
		interval: interval,
		jitter:   jitter,
		timeout:  timeout,
		task:     task,
		clock:    clock.Real(),
		randN:    rand.Int64N,
		done:     make(chan struct{}),
	}
	for _, o := range opts {
		if o != nil {
			o.apply(p)
		}
	}
	return p, nil
}

// Start starts the loop on a new goroutine and returns at once. The loop
// runs until Stop is called or ctx ends. Start returns ErrStarted if
// the Periodic was started or stopped before, and an error if ctx is nil.
func (p *Periodic) Start(ctx context.Context) error {
	if ctx == nil {
		return errors.New("periodic: Start: nil context")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.stopped {
		return ErrStarted
	}
	p.started = true
	loopCtx, cancel := context.WithCancel(ctx)
	p.cancel = cancel
	go p.loop(loopCtx)
	return nil
}

// Stop ends the loop and waits for its goroutine to exit, which happens once
// the call in progress (if any) returns; that call's context is cancelled.
// Stop is idempotent and may be called before Start, which then fails. It
// must not be called from the task or the error handler, since it would wait
// for itself.
func (p *Periodic) Stop() {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		<-p.done
		return
	}
	p.stopped = true
	if !p.started {
		close(p.done)
		p.mu.Unlock()
		return
	}
	cancel := p.cancel
	p.mu.Unlock()
	cancel()
	<-p.done
}

// Done returns a channel that is closed once the loop has exited: after
// Stop, or after the context given to Start ends, or when Stop was called
// before Start.
func (p *Periodic) Done() <-chan struct{} { return p.done }

// loop is the body of the background goroutine.
func (p *Periodic) loop(ctx context.Context) {
	defer close(p.done)
	defer p.cancelLoop()

	var wait time.Duration
	if p.initialJitter {
		wait = jitter.Add(0, p.jitter, p.randN)
	}
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if wait > 0 {
			if timer == nil {
				timer = p.clock.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			select {
			case <-ctx.Done():
				return
			case <-timer.C():
			}
		}
		if ctx.Err() != nil {
			return
		}
		p.call(ctx)
		wait = jitter.Add(p.interval, p.jitter, p.randN)
	}
}

// cancelLoop releases the loop context when the loop exits by itself (the
// parent context ended, or the task called runtime.Goexit).
func (p *Periodic) cancelLoop() {
	p.mu.Lock()
	cancel := p.cancel
	p.mu.Unlock()
	cancel()
}

// call makes one call of the task and reports its error.
func (p *Periodic) call(loopCtx context.Context) {
	ctx, cancel := context.WithCancelCause(loopCtx)
	defer cancel(nil)
	var timer clock.Timer
	if p.timeout > 0 {
		cause := &taskTimeoutError{timeout: p.timeout}
		timer = p.clock.AfterFunc(p.timeout, func() { cancel(cause) })
	}
	err := p.invoke(ctx)
	if timer != nil {
		timer.Stop()
	}
	if err == nil || p.onError == nil {
		return
	}
	var timeout *taskTimeoutError
	if loopCtx.Err() == nil && errors.As(context.Cause(ctx), &timeout) {
		// The call ran out of time: the task's error is most likely the
		// cancellation itself, so say why it happened.
		err = &taskTimeoutError{timeout: p.timeout, err: err}
	} else if loopCtx.Err() != nil && !errors.Is(err, ErrPanic) &&
		(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// The loop is being stopped and the task merely reports that; this
		// is not a failure worth handling.
		return
	}
	p.onError(err)
}

// invoke runs the task, turning a panic into a *PanicError.
func (p *Periodic) invoke(ctx context.Context) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = kiterr.NewPanicError(ErrPanic, v)
		}
	}()
	return p.task(ctx)
}
