package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// AttemptAnnotator returns a RoundTripper to place inside otelhttp when
// gotry wraps otelhttp:
//
//	tel := telemetry.New()
//	tr := transport.New(otelhttp.NewTransport(tel.AttemptAnnotator(base)), tel.Transport())
//
// otelhttp then makes the one CLIENT span per attempt and injects its
// headers; the annotator finds that span in the request's context and adds
// http.request.resend_count and gotry.attempt.kind (on a resend) and
// gotry.attempt.probe, and
// gotry adds gotry.attempt.outcome when the attempt ends while otelhttp's
// span still records (a response; otelhttp ends its span at once on a
// transport error, before gotry has classified it). A hedge loser's span
// is marked by the annotator itself: outcome "cancelled", error.type
// ErrorTypeAttemptLost, status Ok (not an error). Outside that layout it
// only passes requests through. base nil means http.DefaultTransport. The
// request is not modified.
func (t *Telemetry) AttemptAnnotator(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &annotator{t: t, base: base}
}

type annotator struct {
	t    *Telemetry
	base http.RoundTripper
}

var _ http.RoundTripper = (*annotator)(nil)

func (an *annotator) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	a := an.t.attemptFrom(ctx)
	if a == nil {
		return an.base.RoundTrip(req) // not gotry's attempt
	}
	if a.span != nil {
		// gotry made the attempt's span: if otelhttp made another between
		// gotry and here (behind a RoundTripper gotry could not see
		// through), this is the earliest gotry can know it.
		if a.tracedBelow(req) {
			a.c.hs.foundBelow(ctx, a.c)
		}
		return an.base.RoundTrip(req)
	}
	s := trace.SpanFromContext(ctx)
	if s.SpanContext().SpanID() == a.c.span.SpanContext().SpanID() {
		return an.base.RoundTrip(req) // no span between gotry and here
	}
	if s.IsRecording() {
		var buf [3]attribute.KeyValue
		s.SetAttributes(a.attrs(buf[:0])...)
	}
	a.outer = s
	resp, err := an.base.RoundTrip(req)
	if err != nil && errors.Is(context.Cause(ctx), resilience.ErrAttemptLost) && s.IsRecording() {
		// otelhttp ends its span on this error, before gotry classifies the
		// attempt: mark it cancelled now. Status Ok is final, so otelhttp's
		// Error status does not stick to a loser, which is no failure.
		s.SetAttributes(KeyAttemptOutcome.String(resilience.AttemptCancelled.String()))
		s.SetStatus(codes.Ok, "")
		if !errors.Is(err, resilience.ErrAttemptLost) {
			// The base reported the cancellation without its cause: let
			// otelhttp's error.type name the lost attempt all the same.
			err = fmt.Errorf("%w: %w", resilience.ErrAttemptLost, err)
		}
	}
	return resp, err
}

// Unwrap returns the base transport.
func (an *annotator) Unwrap() http.RoundTripper { return an.base }

// spansBelow reports whether something in rt makes each request's CLIENT
// span, so that a transport over rt must make none for its attempts: rt is,
// or wraps through Unwrap() http.RoundTripper methods (a bounded number of
// them), an *otelhttp.Transport or a transport t instruments.
func (t *Telemetry) spansBelow(rt http.RoundTripper) bool {
	for range 32 {
		switch x := rt.(type) {
		case *otelhttp.Transport:
			return true
		case *transport.Transport:
			if t.instruments(x) {
				return true
			}
			rt = x.Unwrap()
		case interface{ Unwrap() http.RoundTripper }:
			rt = x.Unwrap()
		default:
			return false
		}
	}
	return false
}

// Run-time detection. spansBelow sees otelhttp only through Unwrap methods;
// a middleware between gotry and otelhttp that has none (most logging, auth
// and metrics RoundTrippers) hides it, and each attempt then gets two
// CLIENT spans, gotry's and otelhttp's under it. gotry cannot look below
// such a middleware before sending, but the request that reached the
// network comes back with the response: http.Transport sets resp.Request
// to the request it was given, which is otelhttp's copy when otelhttp sits
// below, its context holding otelhttp's span and its header otelhttp's
// traceparent. (AttemptAnnotator, when placed inside that otelhttp, sees
// the same request before it is sent.) Once one attempt shows it, the
// transport stops making attempt spans (hookSet.below), with one warning;
// the attempts already in flight keep both.

// tracedBelow reports whether req, attempt a's request as it reached the
// base below gotry (resp.Request) or the annotator, was traced again below
// gotry's attempt span: its context holds another span of the same trace
// (below gotry, in every layout that gets here: a middleware passes on the
// context it was given or one derived from it), and that span is a CLIENT
// span. The
// kind is read through the SDK's SpanKind method, which recording spans
// have; a span without it (unsampled, or another SDK's) counts when it is
// what the request propagates: a field gotry's propagator wrote into the
// attempt's header has another value on req. A span a middleware makes for
// itself (INTERNAL), and a request that still carries gotry's span, are
// not a trace below: gotry's attempt span stays the one CLIENT span.
func (a *attempt) tracedBelow(req *http.Request) bool {
	if a.span == nil || req == nil || !a.c.http() {
		return false
	}
	own := a.span.SpanContext()
	s := trace.SpanFromContext(req.Context())
	sc := s.SpanContext()
	if !sc.IsValid() || sc.SpanID() == own.SpanID() || sc.TraceID() != own.TraceID() {
		return false
	}
	if k, ok := s.(interface{ SpanKind() trace.SpanKind }); ok {
		return k.SpanKind() == trace.SpanKindClient
	}
	return a.reinjected(req.Header)
}

// reinjected reports whether h carries, for one of the fields the
// propagator writes, a value other than the one gotry wrote into the
// attempt's header: something below injected another span context.
func (a *attempt) reinjected(h http.Header) bool {
	own := a.carrier.h
	if own == nil || h == nil {
		return false
	}
	for _, f := range a.c.hs.t.prop.Fields() {
		k := canonicalKey(f)
		if mine, theirs := own[k], h[k]; len(mine) > 0 && len(theirs) > 0 && mine[0] != theirs[0] {
			return true
		}
	}
	return false
}

// foundBelow records that the transport's attempts are traced below it:
// from now on hs makes no attempt spans (nor http.client.request.duration,
// which otelhttp records), and says so once (warnSpansBelow).
func (hs *hookSet) foundBelow(ctx context.Context, c *call) {
	if hs.below.CompareAndSwap(false, true) {
		hs.warnSpansBelow(ctx, c)
	}
}
