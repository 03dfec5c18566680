package resilience

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// An attempt's own context (an attempt that can be cancelled alone: a
// hedge's loser, a per-attempt timeout, a result whose use has ended) is an
// attemptCtx: what context.WithCancelCause makes, for one allocation and no
// closure, costing nothing more until something waits on it. Its Done
// channel, and its link to the call's context, are made when first asked
// for; on a hot path whose base never waits on the context they are never
// made, and over http.Transport (which does wait) they cost about what the
// standard library's children map does.
//
// context.Cause must still report the engine's cause (ErrAttemptLost,
// ErrAttemptTimeout): the transport documents it and telemetry relies on
// it. Cause finds a cause only in the context package's own cancelCtx, which
// it looks up with a key of its own; the engine learns that key once, by
// asking Cause about a probe (learnCauseKey), and an attemptCtx cancelled by
// the engine answers it with a cancelCtx cancelled with the same cause. Were
// a Go release to change how Cause works, the check in learnCauseKey fails
// and the engine makes every attempt's context with context.WithCancelCause
// instead: slower, never wrong.

// ownCtx is an attempt's own context, as the engine cancels it: an
// attemptCtx, or the standard library's (see stdContexts). The zero value
// is an attempt that shares the call's context; cancel then does nothing.
type ownCtx struct {
	c   *attemptCtx
	std context.CancelCauseFunc
}

// newOwnCtx returns a new cancelable child of parent.
func newOwnCtx(parent context.Context) (context.Context, ownCtx) {
	if stdContexts {
		ctx, cancel := context.WithCancelCause(parent)
		return ctx, ownCtx{std: cancel}
	}
	c := &attemptCtx{parent: parent}
	return c, ownCtx{c: c}
}

// set reports whether the attempt has a context of its own.
func (o ownCtx) set() bool { return o.c != nil || o.std != nil }

// cancel cancels the context with cause (nil: context.Canceled), as a
// CancelCauseFunc does; later calls do nothing.
func (o ownCtx) cancel(cause error) {
	switch {
	case o.c != nil:
		if cause == nil {
			cause = context.Canceled
		}
		o.c.cancel(context.Canceled, cause)
	case o.std != nil:
		o.std(cause)
	}
}

// attemptCtx is a cancelable child of the call's context (see above). It is
// never reused: the winner's context escapes with its result.
type attemptCtx struct {
	parent context.Context
	// cancelled is set once err (and cause) are: reads of them after a
	// load that sees it need no lock.
	cancelled atomic.Bool
	mu        sync.Mutex   // guards the fields below, and the cancellation itself
	done      atomic.Value // chan struct{}, made by the first Done
	err       error
	// cause is what context.Cause's lookup gets for the cancellation the
	// engine made (see causeValue); nil when the parent's cancellation
	// reached this context, whose cause is then the parent's.
	cause any
	links *ctxLinks // made by the first Done or AfterFunc
}

// ctxLinks is what an attemptCtx holds once something waits on it.
type ctxLinks struct {
	unlink func() bool   // stops the parent's AfterFunc (nil: the parent is never cancelled)
	afters []*afterEntry // this context's AfterFunc registrations
}

// afterEntry is one AfterFunc registration.
type afterEntry struct {
	c *attemptCtx
	f func()
}

// closedChan is the Done channel of a context cancelled before anyone asked.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

func (c *attemptCtx) Deadline() (time.Time, bool) { return c.parent.Deadline() }

func (c *attemptCtx) Err() error {
	if c.cancelled.Load() {
		return c.err
	}
	if err := c.parent.Err(); err != nil {
		// The parent ended and nothing linked this context to it yet.
		c.cancel(err, nil)
		return c.Err()
	}
	return nil
}

func (c *attemptCtx) Done() <-chan struct{} {
	if d := c.done.Load(); d != nil {
		return d.(chan struct{})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := c.done.Load(); d != nil {
		return d.(chan struct{})
	}
	if c.cancelled.Load() {
		c.done.Store(closedChan)
		return closedChan
	}
	ch := make(chan struct{})
	c.done.Store(ch)
	c.link()
	return ch
}

func (c *attemptCtx) Value(key any) any {
	if key == causeKey && causeKey != nil && c.cancelled.Load() && c.cause != nil {
		return c.cause
	}
	return c.parent.Value(key)
}

func (c *attemptCtx) String() string { return "resilience.attemptContext" }

// AfterFunc is what context.AfterFunc and the context package's children
// use to follow this context (context.WithCancelCause(attemptCtx) over
// http.Transport registers one). Unlike context.AfterFunc, f runs on the
// cancelling goroutine when this context is cancelled later (the context
// package registers only short functions that cancel a child, as a
// cancelCtx cancels its children); it runs on a goroutine of its own when
// the context is cancelled already, since the caller may hold a lock f
// takes.
func (c *attemptCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.cancelled.Load() {
		c.mu.Unlock()
		go f()
		return stopNothing
	}
	c.link()
	a := &afterEntry{c: c, f: f}
	c.links.afters = append(c.links.afters, a)
	c.mu.Unlock()
	return a.stop
}

func stopNothing() bool { return false }

// stop removes the registration, reporting whether f had not run.
func (a *afterEntry) stop() bool {
	c := a.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.links == nil {
		return false
	}
	for i, x := range c.links.afters {
		if x == a {
			c.links.afters = append(c.links.afters[:i], c.links.afters[i+1:]...)
			return true
		}
	}
	return false
}

// link makes c's links and, when the parent can be cancelled, has the
// parent cancel c. Under mu, with c live.
func (c *attemptCtx) link() {
	if c.links != nil {
		return
	}
	c.links = new(ctxLinks)
	if c.parent.Done() != nil {
		c.links.unlink = context.AfterFunc(c.parent, c.parentDone)
	}
}

// parentDone cancels c after its parent.
func (c *attemptCtx) parentDone() { c.cancel(c.parent.Err(), nil) }

// cancel cancels c with err (context.Canceled, or the parent's error) and
// cause (nil when the parent's cancellation reached c). The first call
// wins. It closes Done, unlinks c from its parent, and runs the AfterFunc
// registrations, with no lock held.
func (c *attemptCtx) cancel(err, cause error) {
	c.mu.Lock()
	if c.cancelled.Load() {
		c.mu.Unlock()
		return
	}
	c.err = err
	switch {
	case cause == ErrAttemptLost: //nolint:errorlint // the sentinel itself; a wrapped one is looked up as any cause
		c.cause = lostValue
	case cause == context.Canceled: //nolint:errorlint // as above
		c.cause = canceledValue
	case cause != nil:
		c.cause = causeValue(cause)
	}
	c.cancelled.Store(true)
	if d := c.done.Load(); d != nil {
		close(d.(chan struct{}))
	}
	links := c.links
	c.links = nil
	c.mu.Unlock()
	if links == nil {
		return
	}
	if links.unlink != nil {
		links.unlink()
	}
	for _, a := range links.afters {
		a.f()
	}
}

// What context.Cause needs (see the top of this file).
var (
	// stdContexts: attempts take context.WithCancelCause, because
	// learnCauseKey could not make an attemptCtx report its cause.
	stdContexts bool
	// causeKey is the key context.Cause looks its cause up with.
	causeKey any
	// causeValues holds the lookup's answer for the engine's usual causes;
	// lostValue and canceledValue are the two of every call.
	causeValues              = map[error]any{}
	lostValue, canceledValue any
)

func init() { learnCauseKey() }

// causeProbe records the first key a lookup asks it for.
type causeProbe struct {
	context.Context
	key any
}

func (p *causeProbe) Err() error { return context.Canceled }

func (p *causeProbe) Value(key any) any {
	if p.key == nil {
		p.key = key
	}
	return nil
}

// learnCauseKey learns causeKey and checks, end to end, that an attemptCtx
// cancelled with a cause reports it through context.Cause, directly and to
// a context.WithCancelCause child; otherwise it sets stdContexts.
func learnCauseKey() {
	p := &causeProbe{Context: context.Background()}
	_ = context.Cause(p)
	causeKey = p.key
	for _, cause := range []error{context.Canceled, ErrAttemptLost, ErrAttemptTimeout} {
		if causeKey != nil {
			causeValues[cause] = causeValueOf(cause)
		}
	}
	lostValue, canceledValue = causeValues[ErrAttemptLost], causeValues[context.Canceled]
	if causeKey == nil || !causeWorks() {
		stdContexts, causeKey = true, nil
	}
}

// causeWorks is learnCauseKey's end-to-end check.
func causeWorks() bool {
	c := &attemptCtx{parent: context.Background()}
	child, stop := context.WithCancelCause(c)
	defer stop(nil)
	c.cancel(context.Canceled, ErrAttemptLost)
	select {
	case <-child.Done():
	default:
		return false
	}
	// Identity, not errors.Is: the cause must come back as given.
	lost := ErrAttemptLost
	return errors.Is(c.Err(), context.Canceled) &&
		context.Cause(c) == lost && context.Cause(child) == lost //nolint:errorlint // identity, as said
}

// causeValue returns what the cause lookup answers for a context cancelled
// with cause.
func causeValue(cause error) any {
	if v, ok := causeValues[cause]; ok {
		return v
	}
	return causeValueOf(cause)
}

// causeValueOf asks a cancelCtx cancelled with cause.
func causeValueOf(cause error) any {
	if causeKey == nil {
		return nil
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	return ctx.Value(causeKey)
}
