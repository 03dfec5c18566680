package telemetry

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// AttemptAnnotator returns a RoundTripper to place inside otelhttp when
// gotry wraps otelhttp (with WithOtelhttpAttempts):
//
//	tel := telemetry.New(telemetry.WithOtelhttpAttempts())
//	tr := transport.New(
//		otelhttp.NewTransport(tel.AttemptAnnotator(base)),
//		transport.WithHooks(tel.Hooks()))
//
// otelhttp then makes the one CLIENT span per attempt and injects its
// headers; the annotator finds that span in the request's context and adds
// http.request.resend_count, gotry.attempt.kind and gotry.attempt.probe, and
// gotry adds gotry.attempt.outcome when the attempt ends while otelhttp's
// span still records (a response; otelhttp ends its span at once on a
// transport error, before gotry has classified it). Outside that layout it
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
	return an.base.RoundTrip(req)
}

// Unwrap returns the base transport.
func (an *annotator) Unwrap() http.RoundTripper { return an.base }
