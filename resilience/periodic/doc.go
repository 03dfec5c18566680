// Package periodic runs a task over and over on one background goroutine,
// with a jittered pause between calls and a timeout on each call: a cache
// refresh, a poll, a heartbeat.
//
// The model: New checks the arguments, Start runs the loop, Stop ends it and
// waits for its goroutine. The pause runs from the end of one call to the
// start of the next and lasts interval plus a uniform random amount in
// [0, jitter] (bounds inclusive, drawn by the same implementation as the
// backoffs of package resilience), so calls never overlap and the calls of
// many replicas drift apart. Errors and recovered panics go to the handler
// set with WithErrorHandler; without one they are dropped.
//
// Most callers want New, then Start with the context of the component that
// owns the work, and Stop when it shuts down:
//
//	p, err := periodic.New(30*time.Second, 5*time.Second, 10*time.Second, refresh,
//		periodic.WithErrorHandler(logErr))
//	...
//	err = p.Start(ctx)
//	defer p.Stop()
//
// A Periodic is safe for concurrent use and costs one goroutine while it
// runs; the zero Periodic is not usable, build one with New.
package periodic
