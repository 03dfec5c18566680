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
	if a == nil || a.span != nil {
		return an.base.RoundTrip(req) // not gotry's attempt, or gotry made the span
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
