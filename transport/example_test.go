package transport_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// flaky answers 503 to the first n requests, then 200 "ok".
func flaky(n int32) *httptest.Server {
	var seen atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) <= n {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	}))
}

func Example() {
	srv := flaky(2)
	defer srv.Close()

	client := &http.Client{Transport: transport.New(nil,
		transport.WithMaxAttempts(4),
		transport.WithBackoff(resilience.ExponentialJitter(10*time.Millisecond, 100*time.Millisecond)),
	)}
	resp, err := client.Get(srv.URL) // an unchanged call site
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	// Output: 200 ok
}

func ExampleWithPolicy() {
	srv := flaky(1)
	defer srv.Close()
	client := &http.Client{Transport: transport.New(nil, transport.WithBackoff(resilience.Constant(0)))}

	// This one call must be sent exactly once.
	ctx := transport.WithPolicy(context.Background(), transport.NoRetry())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output: 503
}

func ExampleWithHooks() {
	srv := flaky(2)
	defer srv.Close()
	client := &http.Client{Transport: transport.New(nil,
		transport.WithBackoff(resilience.Constant(5*time.Millisecond)),
		transport.WithHooks(transport.Hooks{
			OnRetry: func(e resilience.RetryEvent) {
				fmt.Printf("attempt %d got %d; retrying in %v\n", e.Attempt, e.Code, e.Delay)
			},
			OnCallEnd: func(e resilience.CallEndEvent) {
				fmt.Printf("done after %d attempts: %s\n", e.Attempts, e.Reason)
			},
		}),
	)}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	resp.Body.Close()
	// Output:
	// attempt 1 got 503; retrying in 5ms
	// attempt 2 got 503; retrying in 5ms
	// done after 3 attempts: success
}

func ExampleWithClassifier() {
	var seen atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) == 1 {
			w.Header().Set("X-Retryable", "true")
			w.WriteHeader(http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	client := &http.Client{Transport: transport.New(nil,
		transport.WithBackoff(resilience.Constant(0)),
		transport.WithClassifier(func(a transport.Attempt) transport.Decision {
			if a.Response != nil && a.Response.StatusCode == http.StatusConflict &&
				a.Response.Header.Get("X-Retryable") == "true" {
				return transport.Retry
			}
			return transport.Default // the built-in rules
		}),
	)}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "after", seen.Load(), "requests")
	// Output: 204 after 2 requests
}

func ExampleWithHedging() {
	var seen atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) == 1 {
			<-r.Context().Done() // the first request stalls until it loses
			return
		}
		io.WriteString(w, "fast")
	}))
	defer srv.Close()

	var hedges atomic.Int32
	client := &http.Client{Transport: transport.New(nil,
		transport.WithHedging(20*time.Millisecond, 1),
		transport.WithHooks(transport.Hooks{OnHedge: func(resilience.HedgeEvent) { hedges.Add(1) }}),
	)}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(string(body), "after", hedges.Load(), "hedge")
	// Output: fast after 1 hedge
}

func Example_giveUp() {
	client := &http.Client{Transport: transport.New(roundTripperFunc(func(*http.Request) (*http.Response, error) {
		return nil, io.ErrUnexpectedEOF
	}), transport.WithBackoff(resilience.Constant(0)))}
	_, err := client.Get("http://127.0.0.1:1/")
	var ge *transport.Error
	if errors.As(err, &ge) {
		fmt.Println("gave up after", ge.Attempts, "attempts:", errors.Is(err, io.ErrUnexpectedEOF))
	}
	// Output: gave up after 3 attempts: true
}

// The server sees which attempt it is answering: "1; initial", "2; retry",
// "3; hedge".
func ExampleWithAttemptHeader() {
	var (
		mu   sync.Mutex
		seen []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Gotry-Attempt"))
		first := len(seen) == 1
		mu.Unlock()
		if first {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()

	client := &http.Client{Transport: transport.New(nil,
		transport.WithAttemptHeader("Gotry-Attempt"),
		transport.WithBackoff(resilience.Constant(time.Millisecond)),
	)}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	fmt.Printf("%q\n", seen)
	// Output: ["1; initial" "2; retry"]
}

// Stats is one snapshot of the budget and of every tracked host, for
// gauges (package telemetry reports it at each collection): here the
// breaker of a host that keeps failing opens.
func ExampleTransport_Stats() {
	srv := flaky(100)
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	tr := transport.New(base, transport.WithMaxAttempts(1),
		transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 2, OpenDuration: time.Minute}))
	for range 3 {
		if resp, err := (&http.Client{Transport: tr}).Get(srv.URL); err == nil {
			resp.Body.Close()
		}
	}
	st := tr.Stats()
	for _, h := range st.Hosts {
		fmt.Println(h.Breaker)
	}
	fmt.Println(st.BudgetTokens > 0)
	// Output:
	// open
	// true
}

// A service logs the settings its transport runs with at start-up: the
// fields the transport shares with resilience's Retrier, after every
// option and default.
func ExampleTransport_Settings() {
	t := transport.New(nil,
		transport.WithMaxAttempts(4),
		transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 10}),
	)
	s := t.Settings()
	fmt.Printf("attempts=%d budget=%.2f+%d breaker=%v limit=%v max_hosts=%d max_retry_after=%v\n",
		s.MaxAttempts, s.BudgetRatio, s.BudgetReserve, s.Breaker != nil, s.ConcurrencyLimit != nil, s.MaxKeys, s.MaxRetryAfter)
	// Output:
	// attempts=4 budget=0.25+2 breaker=true limit=false max_hosts=10000 max_retry_after=30s
}
