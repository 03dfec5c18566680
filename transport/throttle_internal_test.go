package transport

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/internal/clock/fakeclock"
	"github.com/MrVSiK/gotry/resilience"
)

// The verdict Classify gives an answer: which are throttles (the server
// asking for less, which the breaker ignores: see Classifier), which are
// overload answers, and where Retry-After is read (issue #37).
func TestClassifyMarksThrottles(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	inTwo := now.Add(2 * time.Second).Format(http.TimeFormat)
	type verdict struct {
		retryable, throttle, overload, notIdempotent, hasRA bool
		ra                                                  time.Duration
	}
	cases := []struct {
		name     string
		method   string
		attempts int
		opts     []Option
		code     int
		header   []string // key, value pairs
		want     verdict
	}{
		{"429", "GET", 3, nil, 429, nil, verdict{retryable: true, throttle: true, overload: true}},
		{"429 with Retry-After", "GET", 3, nil, 429, []string{"Retry-After", "2"}, verdict{retryable: true, throttle: true, overload: true, hasRA: true, ra: 2 * time.Second}},
		{"503 with Retry-After in seconds", "GET", 3, nil, 503, []string{"Retry-After", "2"}, verdict{retryable: true, throttle: true, overload: true, hasRA: true, ra: 2 * time.Second}},
		{"503 with Retry-After as a date", "GET", 3, nil, 503, []string{"Retry-After", inTwo}, verdict{retryable: true, throttle: true, overload: true, hasRA: true, ra: 2 * time.Second}},
		// A date asks for a wait whatever the clock says; one that has
		// come means no wait, but still a throttle.
		{"503 with Retry-After as a date that has come", "GET", 3, nil, 503, []string{"Retry-After", now.Format(http.TimeFormat)}, verdict{retryable: true, throttle: true, overload: true, hasRA: true}},
		// "Retry after 0 s" asks for no wait: no throttle.
		{"503 with Retry-After: 0", "GET", 3, nil, 503, []string{"Retry-After", "0"}, verdict{retryable: true, overload: true, hasRA: true}},
		{"429 with Retry-After: 0", "GET", 3, nil, 429, []string{"Retry-After", "0"}, verdict{retryable: true, throttle: true, overload: true, hasRA: true}},
		// A dead backend behind a proxy: a failure, the breaker counts it.
		{"bare 503", "GET", 3, nil, 503, nil, verdict{retryable: true, overload: true}},
		{"503 with a Retry-After that does not parse", "GET", 3, nil, 503, []string{"Retry-After", "soon"}, verdict{retryable: true, overload: true}},
		{"502 with Retry-After", "GET", 3, nil, 502, []string{"Retry-After", "2"}, verdict{retryable: true}},
		{"200", "GET", 3, nil, 200, nil, verdict{}},
		// A POST with a replayable body may be repeated only after a refused
		// stream: the throttle ends it, still a throttle.
		{"503 with Retry-After on a POST", "POST", 3, nil, 503, []string{"Retry-After", "2"}, verdict{retryable: true, throttle: true, overload: true, notIdempotent: true, hasRA: true, ra: 2 * time.Second}},
		{"429 on a POST at one attempt", "POST", 1, nil, 429, nil, verdict{retryable: true, throttle: true, overload: true}},
		// A 429, or a 503 with Retry-After, is a throttle whatever a
		// classifier decides of it.
		{"429 a classifier makes final", "GET", 3, []Option{WithClassifier(func(Attempt) Decision { return DontRetry })}, 429, nil, verdict{throttle: true, overload: true}},
		{"503 with Retry-After a classifier retries", "GET", 3, []Option{WithClassifier(func(Attempt) Decision { return Retry })}, 503, []string{"Retry-After", "2"}, verdict{retryable: true, throttle: true, overload: true, hasRA: true, ra: 2 * time.Second}},
		{"503 with Retry-After, 503 not a retryable status", "GET", 3, []Option{WithRetryableStatuses(502)}, 503, []string{"Retry-After", "2"}, verdict{throttle: true, overload: true}},
		// A classifier marks a service's own throttling answers.
		{"bare 503 a classifier marks Throttled", "GET", 3, []Option{WithClassifier(func(Attempt) Decision { return Throttled })}, 503, nil, verdict{retryable: true, throttle: true, overload: true}},
		{"500 with Retry-After a classifier marks Throttled", "GET", 3, []Option{WithClassifier(func(Attempt) Decision { return Throttled })}, 500, []string{"Retry-After", "1"}, verdict{retryable: true, throttle: true, overload: true, hasRA: true, ra: time.Second}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := append([]Option{WithClock(fakeclock.New(now)), WithMaxAttempts(tc.attempts)}, tc.opts...)
			tr := New(http.DefaultTransport, opts...)
			req, err := http.NewRequest(tc.method, "http://svc.test/", strings.NewReader("body"))
			if err != nil {
				t.Fatal(err)
			}
			c := &call{t: tr, req: req, cl: tr.cfg.classifier, bodyFresh: true}
			if _, _, err := c.Prepare(tc.attempts); err != nil {
				t.Fatal(err)
			}
			resp := &http.Response{StatusCode: tc.code, Header: http.Header{}, Body: http.NoBody, Request: req}
			for i := 0; i+1 < len(tc.header); i += 2 {
				resp.Header.Set(tc.header[i], tc.header[i+1])
			}
			v := c.Classify(resp, nil, resilience.AttemptInfo{Number: 1, Kind: resilience.KindInitial})
			got := verdict{v.Retryable, v.Throttle, v.Overload, v.NotIdempotent, v.HasRetryAfter, v.RetryAfter}
			if got != tc.want {
				t.Errorf("verdict %+v, want %+v", got, tc.want)
			}
		})
	}
}
