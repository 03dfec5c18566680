package transport_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// A Transport configured as in the README's quick start: four attempts,
// full-jitter backoff, the retry budget and a hedge after 50ms. The server
// here fails twice, then answers.
func ExampleNew() {
	srv := flaky(2)
	defer srv.Close()

	client := &http.Client{Transport: transport.New(
		http.DefaultTransport,
		transport.WithMaxAttempts(4),
		transport.WithBackoff(resilience.ExponentialJitter(time.Millisecond, 10*time.Millisecond)),
		transport.WithRetryBudget(0.1, 10),
		transport.WithHedging(50*time.Millisecond, 2),
	)}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	// Output: 200 ok
}

// A 429 or 503 with a Retry-After the transport may honour replaces the
// backoff; one asking for longer than WithMaxRetryAfter ends the request at
// once with the server's response.
func Example_retryAfter() {
	var seen atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch seen.Add(1) {
		case 1:
			w.Header().Set("Retry-After", "0") // retry now
			w.WriteHeader(http.StatusTooManyRequests)
		case 2:
			w.Header().Set("Retry-After", "3600") // an hour: too long
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			io.WriteString(w, "ok")
		}
	}))
	defer srv.Close()

	client := &http.Client{Transport: transport.New(nil,
		transport.WithMaxRetryAfter(30*time.Second),
		transport.WithHooks(transport.Hooks{
			OnRetry: func(e resilience.RetryEvent) {
				fmt.Printf("attempt %d got %d; retry in %v (Retry-After: %v)\n",
					e.Attempt, e.Code, e.Delay, e.FromRetryAfter)
			},
			OnCallEnd: func(e resilience.CallEndEvent) {
				fmt.Println("ended:", e.Reason)
			},
		}),
	)}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	resp.Body.Close()
	fmt.Println("returned", resp.StatusCode, "Retry-After:", resp.Header.Get("Retry-After"))
	// Output:
	// attempt 1 got 429; retry in 0s (Retry-After: true)
	// ended: retry_after_too_long
	// returned 503 Retry-After: 3600
}

// A Policy in the request's context overrides the transport's settings for
// that request alone; zero fields inherit them.
func Example_perRequestPolicy() {
	srv := flaky(4)
	defer srv.Close()
	// A reserve of 4 retries: a new client, with no success yet, retries
	// from its reserve alone (2 by default).
	client := &http.Client{Transport: transport.New(nil, transport.WithBackoff(resilience.Constant(0)),
		transport.WithRetryBudget(transport.DefaultBudgetRatio, 4))}

	// The transport allows 3 attempts; this request may make 5.
	ctx := transport.WithPolicy(context.Background(), transport.Policy{MaxAttempts: 5})
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output: 200
}

// POST is not idempotent, so it gets one attempt, unless it carries an
// Idempotency-Key the server honours.
func Example_idempotencyKey() {
	var seen atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	client := &http.Client{Transport: transport.New(nil, transport.WithBackoff(resilience.Constant(0)))}

	post := func(key string) {
		seen.Store(0)
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"item":"book"}`))
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		resp.Body.Close()
		fmt.Printf("key %q: %d after %d requests\n", key, resp.StatusCode, seen.Load())
	}
	post("")
	post("order-42")
	// Output:
	// key "": 503 after 1 requests
	// key "order-42": 503 after 3 requests
}

// A body that cannot be sent again (no GetBody, larger than
// WithMaxBufferedBody) is sent once, streamed to the base unread.
func Example_requestBody() {
	var seen atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		io.Copy(io.Discard, r.Body)
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	client := &http.Client{Transport: transport.New(nil,
		transport.WithBackoff(resilience.Constant(0)),
		transport.WithMaxBufferedBody(4),
		transport.WithHooks(transport.Hooks{OnCallEnd: func(e resilience.CallEndEvent) {
			fmt.Println("ended:", e.Reason)
		}}),
	)}

	// io.MultiReader hides the *strings.Reader, so http.NewRequest sets no
	// GetBody: the transport could replay it only by buffering it.
	body := io.MultiReader(strings.NewReader("more than four bytes"))
	req, _ := http.NewRequest(http.MethodPut, srv.URL, body)
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "after", seen.Load(), "request")
	// Output:
	// ended: body_not_replayable
	// 503 after 1 request
}

// A breaker per host: once it opens, requests to that host fail at once
// with ErrCircuitOpen, and a request it stopped midway returns the last
// response it had.
func ExampleWithBreaker() {
	var seen atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	tr := transport.New(nil,
		transport.WithBackoff(resilience.Constant(0)),
		transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 2, OpenDuration: time.Minute}),
		transport.WithHooks(transport.Hooks{OnBreakerStateChange: func(e resilience.BreakerStateEvent) {
			fmt.Println("breaker:", e.From, "->", e.To)
		}}),
	)
	client := &http.Client{Transport: tr}

	resp, err := client.Get(srv.URL) // two failures open the breaker; the third attempt is refused
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	resp.Body.Close()
	fmt.Println("first:", resp.StatusCode, "after", seen.Load(), "requests")

	_, err = client.Get(srv.URL)
	fmt.Println("second:", errors.Is(err, transport.ErrCircuitOpen), "after", seen.Load(), "requests")
	h, _ := tr.Stats().Host(strings.TrimPrefix(srv.URL, "http://"))
	fmt.Println("state:", h.Breaker)
	// Output:
	// breaker: closed -> open
	// first: 503 after 2 requests
	// second: true after 2 requests
	// state: open
}

// Telling a refused request, a give-up and a single failure apart.
func Example_errors() {
	client := &http.Client{Transport: transport.New(roundTripperFunc(func(*http.Request) (*http.Response, error) {
		return nil, io.ErrUnexpectedEOF // a connection closed mid-response: retryable
	}), transport.WithBackoff(resilience.Constant(0)))}

	resp, err := client.Get("http://127.0.0.1:1/")
	var ge *transport.Error
	switch {
	case errors.Is(err, transport.ErrCircuitOpen):
		fmt.Println("refused: the host's breaker is open")
	case errors.As(err, &ge):
		fmt.Printf("gave up after %d attempts (%s); last: %v\n", ge.Attempts, ge.Reason, errors.Is(ge.Err, io.ErrUnexpectedEOF))
	case err != nil:
		fmt.Println("one attempt failed, or the caller's context ended:", err)
	default:
		resp.Body.Close() // may be a 5xx after retries ran out
		fmt.Println(resp.StatusCode)
	}
	// Output: gave up after 3 attempts (attempts_exhausted); last: true
}

// A service wraps its handler in Middleware and calls its downstream with
// the incoming request's context: when its caller, which it trusts, says
// it will retry, the service makes one attempt, and the retrying happens at
// one hop only. Here the service trusts callers on loopback, and its
// Transport takes loopback hosts for peers; a real service names its own
// networks and hosts (see WithTrustedCallers and WithHopPeers).
func ExampleMiddleware() {
	var leafHits atomic.Int32
	leaf := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		leafHits.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer leaf.Close()

	internal := func(host string) bool { return host == "127.0.0.1" } // the hosts of the chain
	api := &http.Client{Transport: transport.New(nil, transport.WithHopPeers(internal),
		transport.WithBackoff(resilience.Constant(0)), transport.WithRetryBudget(0, 0))}
	callers := transport.CallersFrom(netip.MustParsePrefix("127.0.0.0/8")) // who may speak the protocol to it
	service := httptest.NewServer(transport.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, leaf.URL, nil)
		resp, err := api.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
	}), transport.WithTrustedCallers(callers)))
	defer service.Close()

	for _, left := range []string{"2", "0"} { // the caller will retry twice more; its last attempt
		leafHits.Store(0)
		req, _ := http.NewRequest(http.MethodGet, service.URL, nil)
		req.Header.Set(transport.RetriesLeftHeader, left)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		resp.Body.Close()
		fmt.Printf("%s left: %d attempts at the leaf, pushback %q\n", left, leafHits.Load(), resp.Header.Get(transport.PushbackHeader))
	}
	// Output:
	// 2 left: 1 attempts at the leaf, pushback ""
	// 0 left: 3 attempts at the leaf, pushback "retried-below"
}
