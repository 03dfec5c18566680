package transport

import (
	"context"
	"fmt"
	"time"

	"github.com/MrVSiK/gotry/resilience"
)

// Policy overrides a Transport's settings for one request; attach it with
// WithPolicy. It follows resilience's rule for configuration: a zero field
// takes its default, here the transport's setting, and resilience.Off
// turns off what the transport has on (MaxHedges). The budget, breaker
// and hooks are transport-wide and cannot be overridden. A Policy that
// Validate rejects fails the request before any attempt.
type Policy struct {
	// MaxAttempts, if positive, replaces the transport's attempt limit.
	MaxAttempts int
	// MaxHedges, if positive, replaces the transport's hedge limit;
	// resilience.Off turns hedging off for this request.
	MaxHedges int
	// HedgeDelay, if positive, replaces the transport's hedge delay.
	HedgeDelay time.Duration
	// Backoff, if set, replaces the transport's backoff.
	Backoff resilience.Backoff
	// PerAttemptTimeout, if positive, replaces the transport's.
	PerAttemptTimeout time.Duration
	// PerAttemptHeaderTimeout, if positive, replaces the transport's (see
	// WithPerAttemptHeaderTimeout): the time an attempt may wait for its
	// response headers once its request may have reached the server.
	PerAttemptHeaderTimeout time.Duration
	// Classifier, if set, replaces the transport's classifier.
	Classifier Classifier
	// RetryNonIdempotent lets this request be retried and hedged whatever
	// its method.
	RetryNonIdempotent bool
	// Criticality, if not the default, orders this request under the
	// concurrency limit (WithConcurrencyLimit): sheddable requests are shed
	// first and never wait, critical ones wait ahead of the rest.
	Criticality resilience.Criticality
	// NoLimit exempts this request from the concurrency limit.
	NoLimit bool
}

// NoRetry is the policy of a request that must be sent exactly once: one
// attempt, no hedges.
func NoRetry() Policy { return Policy{MaxAttempts: 1, MaxHedges: resilience.Off} }

type policyKey struct{}

// WithPolicy returns a context carrying p for requests made with it.
func WithPolicy(ctx context.Context, p Policy) context.Context {
	return context.WithValue(ctx, policyKey{}, p)
}

// PolicyFrom returns the policy attached to ctx, if any.
func PolicyFrom(ctx context.Context) (Policy, bool) {
	p, ok := ctx.Value(policyKey{}).(Policy)
	return p, ok
}

// Validate checks p, naming the first field that makes no sense, in the
// shape of resilience's Validate methods.
func (p Policy) Validate() error {
	switch {
	case p.MaxAttempts < 0:
		return fmt.Errorf("transport: Policy.MaxAttempts must not be negative, got %d", p.MaxAttempts)
	case p.MaxHedges < 0 && p.MaxHedges != resilience.Off:
		return fmt.Errorf("transport: Policy.MaxHedges must not be negative, or must be resilience.Off, got %d", p.MaxHedges)
	case p.HedgeDelay < 0:
		return fmt.Errorf("transport: Policy.HedgeDelay must not be negative, got %v", p.HedgeDelay)
	case p.PerAttemptTimeout < 0:
		return fmt.Errorf("transport: Policy.PerAttemptTimeout must not be negative, got %v", p.PerAttemptTimeout)
	case p.PerAttemptHeaderTimeout < 0:
		return fmt.Errorf("transport: Policy.PerAttemptHeaderTimeout must not be negative, got %v", p.PerAttemptHeaderTimeout)
	case nilBackoffFunc(p.Backoff):
		return fmt.Errorf("transport: Policy.Backoff must not be a nil BackoffFunc (nil inherits the transport's)")
	case p.Criticality < resilience.CriticalitySheddable || p.Criticality > resilience.CriticalityCritical:
		return fmt.Errorf("transport: Policy.Criticality must be one of resilience's criticalities, got %d", int(p.Criticality))
	}
	return nil
}

// nilBackoffFunc reports whether b is a nil function wrapped in
// resilience.BackoffFunc, which is not a nil interface but would crash at
// the first retry (a nil Backoff itself means "inherit").
func nilBackoffFunc(b resilience.Backoff) bool {
	f, ok := b.(resilience.BackoffFunc)
	return ok && f == nil
}
