package resilience

import "context"

// ownCtx cancels an attempt's own context (an attempt that can be cancelled
// alone: a hedge's loser, a per-attempt timeout, a result whose use has
// ended). The zero value stands for an attempt that shares the call's
// context; cancelling it does nothing.
//
// The context is the standard library's (context.WithCancelCause: two
// allocations). A context type of our own could cost one, but http.Transport
// waits on every request's context, and the context package links a child
// to a parent of a foreign type through an AfterFunc method or, under any
// wrapper that adds a value (a tracing base's span), a goroutine per child;
// over a real transport it cost more than it saved (issue #13's closing
// note).
type ownCtx context.CancelCauseFunc

// newOwnCtx returns a new cancelable child of parent.
func newOwnCtx(parent context.Context) (context.Context, ownCtx) {
	ctx, cancel := context.WithCancelCause(parent)
	return ctx, ownCtx(cancel)
}

// set reports whether the attempt has a context of its own.
func (o ownCtx) set() bool { return o != nil }

// cancel cancels the context with cause (nil: context.Canceled); later
// calls do nothing.
func (o ownCtx) cancel(cause error) {
	if o != nil {
		o(cause)
	}
}
