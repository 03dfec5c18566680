package sdktest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// Issue #37: the retry budget must not lose requests to independent,
// partial failures. The tests named TestIssue37... hold that with a real
// client through gotry's defaults (run them with
// go test -run Issue37 ./internal/sdktest/).

// issue37Faults are the faults a quarter of first attempts meet, in turn:
// a 503 without Retry-After, a 429 with Retry-After (1s, the smallest a
// server can say in whole seconds), and a connection reset after the
// request was read.
var issue37Faults = []http.HandlerFunc{
	status(http.StatusServiceUnavailable),
	status(http.StatusTooManyRequests, "Retry-After", "1"),
	reset,
}

// quarterFailing is a Prometheus API server whose query n (told apart by
// its expression, vector(n)) fails its first attempt when n is a multiple
// of 4, with issue37Faults[(n/4) % 3], and answers every other attempt.
type quarterFailing struct {
	*httptest.Server

	mu       sync.Mutex // guards the fields below
	arrivals map[string]int
	faults   int
}

func newQuarterFailing(t *testing.T) *quarterFailing {
	s := &quarterFailing{arrivals: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.FormValue("query")
		var n int
		if _, err := fmt.Sscanf(q, "vector(%d)", &n); err != nil {
			http.Error(w, "bad query "+q, http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.arrivals[q]++
		first := s.arrivals[q] == 1
		if first && n%4 == 0 {
			s.faults++
		}
		s.mu.Unlock()
		if first && n%4 == 0 {
			issue37Faults[(n/4)%len(issue37Faults)](w, r)
			return
		}
		queryOK(w, r)
	}))
	t.Cleanup(func() {
		s.CloseClientConnections()
		s.Close()
	})
	return s
}

// counts returns the arrivals in all and the faults served.
func (s *quarterFailing) counts() (arrivals, faults int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.arrivals {
		arrivals += a
	}
	return arrivals, s.faults
}

// TestIssue37PrometheusEveryQuerySucceeds: Prometheus' API client through
// gotry with its defaults (transport.New over a plain http.Transport, and
// only a hook that records each call's end for the log) sends 120 instant queries at 40 a second, evenly spaced; the
// first attempt of every fourth fails (a 503, a 429 with Retry-After: 1,
// a reset connection, in turn) and every other attempt succeeds. Each
// failure is independent and a single retry heals it, so every query must
// succeed. (Prometheus' client does not retry: gotry is the only layer
// that does. A reset on a reused connection may be resent by net/http
// itself, as the query is marked idempotent; the server counts it as an
// arrival either way.)
//
// On the budget before issue #37's redesign (commit f6ee857) this fails:
// see the log line for the counts.
func TestIssue37PrometheusEveryQuerySucceeds(t *testing.T) {
	const (
		queries = 120
		rate    = 40 // queries a second
	)
	srv := newQuarterFailing(t)
	var calls ends
	tr := transport.New(newBase(t), transport.WithHooks(transport.Hooks{OnCallEnd: calls.add}))
	client, err := api.NewClient(api.Config{Address: srv.URL, RoundTripper: tr})
	if err != nil {
		t.Fatal(err)
	}
	prom := v1.NewAPI(client)
	errs := make([]error, queries)
	var wg sync.WaitGroup
	start := time.Now()
	for n := range queries {
		if d := time.Until(start.Add(time.Duration(n) * time.Second / rate)); d > 0 {
			time.Sleep(d)
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			_, _, errs[n] = prom.Query(ctx, fmt.Sprintf("vector(%d)", n), time.Time{})
		})
	}
	wg.Wait()
	arrivals, faults := srv.counts()
	var failed []int
	for n, err := range errs {
		if err != nil {
			failed = append(failed, n)
		}
	}
	retries, reasons := 0, map[resilience.EndReason]int{}
	for _, e := range calls.get() {
		retries += e.Retries
		reasons[e.Reason]++
	}
	t.Logf("%d queries at %d/s in %v: %d first attempts failed, %d arrivals at the server, %d gotry retries, calls ended %v; %d queries failed %v",
		queries, rate, time.Since(start).Round(time.Millisecond), faults, arrivals, retries, reasons, len(failed), failed)
	if faults != queries/4 {
		t.Errorf("%d faults served, want %d: the test's schedule is broken", faults, queries/4)
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d queries failed, want none; the first: query %d: %v",
			len(failed), queries, failed[0], errs[failed[0]])
	}
}
