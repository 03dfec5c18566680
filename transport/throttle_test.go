package transport_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// answer is one scripted response: a status and header pairs.
type answer struct {
	code int
	kv   []string
}

func answers(a answer, n int) []answer {
	out := make([]answer, n)
	for i := range out {
		out[i] = a
	}
	return out
}

// A throttle (a 429, a 503 whose Retry-After asks for a wait) is the
// server asking for less: the breaker ignores it, neither opening nor
// closing on it. A 503 without Retry-After is how a proxy answers for a
// dead backend: a failure, which opens it (issue #37).
func TestThrottlesDoNotOpenTheBreaker(t *testing.T) {
	var (
		tooMany  = answer{429, nil}
		slowDown = answer{503, []string{"Retry-After", "1"}}
		// A date asks for a wait, as 1 s does; this one has come on the
		// test's clock, so the retried row needs no sleep.
		slowDownDated = answer{503, []string{"Retry-After", fakeStart.Format(http.TimeFormat)}}
		bare503       = answer{503, nil}
		badHeader     = answer{503, []string{"Retry-After", "soon"}}
		noWait        = answer{503, []string{"Retry-After", "0"}}
		ok            = answer{200, nil}
	)
	never := transport.WithClassifier(func(transport.Attempt) transport.Decision { return transport.DontRetry })
	cases := []struct {
		name     string
		attempts int
		opts     []transport.Option
		answers  []answer
		want     resilience.BreakerState
	}{
		{"10 × 429", 1, nil, answers(tooMany, 10), resilience.BreakerClosed},
		{"10 × 503 with Retry-After", 1, nil, answers(slowDown, 10), resilience.BreakerClosed},
		{"10 × 503 with Retry-After as a date, retried", 3, nil, answers(slowDownDated, 30), resilience.BreakerClosed},
		{"10 × 429 a classifier makes final", 1, []transport.Option{never}, answers(tooMany, 10), resilience.BreakerClosed},
		{"5 × bare 503", 1, nil, answers(bare503, 5), resilience.BreakerOpen},
		{"5 × 503 with a Retry-After that does not parse", 1, nil, answers(badHeader, 5), resilience.BreakerOpen},
		{"5 × 503 with Retry-After: 0", 1, nil, answers(noWait, 5), resilience.BreakerOpen},
		// Throttles clear no failure: the fifth failure opens it.
		{"4 × bare 503, 10 × 429, a bare 503", 1, nil, append(append(answers(bare503, 4), answers(tooMany, 10)...), bare503), resilience.BreakerOpen},
		{"4 × bare 503, a 200, a bare 503", 1, nil, append(append(answers(bare503, 4), ok), bare503), resilience.BreakerClosed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var n int
			base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				a := tc.answers[min(n, len(tc.answers)-1)]
				n++
				return fakeResponse(r, a.code, "x", a.kv...), nil
			})
			opts := append([]transport.Option{transport.WithClock(newClock()), noDelay, transport.WithMaxAttempts(tc.attempts),
				transport.WithBreaker(resilience.BreakerConfig{OpenDuration: time.Minute})}, tc.opts...)
			tr := transport.New(base, opts...)
			for n < len(tc.answers) {
				resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://svc.test/", nil))
				if err != nil {
					t.Fatalf("request after %d answers: %v", n, err)
				}
				readBody(t, resp)
			}
			if got := breakerState(tr, "svc.test"); got != tc.want {
				t.Errorf("breaker %v after %d answers, want %v", got, n, tc.want)
			}
		})
	}
}
