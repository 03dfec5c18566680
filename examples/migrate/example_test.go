package migrate_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/gojek/heimdall/v7"
	"github.com/gojek/heimdall/v7/httpclient"
	"github.com/hashicorp/go-retryablehttp"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// call sends one request with do to a loopback server of its own that
// answers its first request 503 and every later one 200 "hello", then
// prints the answer and how many requests the server saw. A POST carries
// a body that can be replayed (http.NewRequest sets GetBody for it).
func call(name string, do func(*http.Request) (*http.Response, error), method string) {
	var seen atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) == 1 {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "hello")
	}))
	defer srv.Close()

	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{"order":42}`)
	}
	req, err := http.NewRequest(method, srv.URL, body)
	if err != nil {
		fmt.Println(name, "error:", err)
		return
	}
	resp, err := do(req)
	if err != nil {
		fmt.Printf("%s %s: error after %s: %v\n", name, method, requests(seen.Load()), err)
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		fmt.Println(name, "error:", err)
		return
	}
	fmt.Printf("%s %s: %d %s after %s\n", name, method, resp.StatusCode, strings.TrimSpace(string(b)), requests(seen.Load()))
}

func requests(n int32) string {
	if n == 1 {
		return "1 request"
	}
	return fmt.Sprintf("%d requests", n)
}

// go-retryablehttp and gotry configured alike: 3 attempts, a backoff
// doubling from 10ms to at most 100ms. A GET is retried by both; a POST
// only by go-retryablehttp, which retries any method: gotry sends a POST
// once unless it carries an Idempotency-Key header or the transport allows
// it (transport.WithNonIdempotentRetries).
func Example_retryablehttp() {
	// Before.
	rc := retryablehttp.NewClient()
	rc.RetryMax = 2 // retries, after the first attempt
	rc.RetryWaitMin = 10 * time.Millisecond
	rc.RetryWaitMax = 100 * time.Millisecond
	rc.Logger = nil // it logs every request to stderr otherwise
	before := rc.StandardClient()

	// After.
	after := &http.Client{Transport: transport.New(nil,
		transport.WithMaxAttempts(3), // attempts, the first included: RetryMax + 1
		transport.WithBackoff(resilience.Exponential(10*time.Millisecond, 100*time.Millisecond)),
	)}

	for _, method := range []string{http.MethodGet, http.MethodPost} {
		call("go-retryablehttp", before.Do, method)
		call("gotry", after.Do, method)
	}
	// Output:
	// go-retryablehttp GET: 200 hello after 2 requests
	// gotry GET: 200 hello after 2 requests
	// go-retryablehttp POST: 200 hello after 2 requests
	// gotry POST: 503 try again after 1 request
}

// heimdall and gotry configured alike: 3 attempts, 10ms between them, each
// attempt bounded by a second. heimdall's client is a Doer of its own;
// gotry is the Transport of a plain http.Client, so every call site and
// SDK that takes one gets it.
func Example_heimdall() {
	// Before.
	before := httpclient.NewClient(
		httpclient.WithHTTPTimeout(time.Second), // each attempt's http.Client.Timeout
		httpclient.WithRetryCount(2),            // retries, after the first attempt
		httpclient.WithRetrier(heimdall.NewRetrier(heimdall.NewConstantBackoff(10*time.Millisecond, 0))),
	)

	// After.
	after := &http.Client{Transport: transport.New(nil,
		transport.WithMaxAttempts(3), // WithRetryCount + 1
		transport.WithBackoff(resilience.Constant(10*time.Millisecond)),
		transport.WithPerAttemptTimeout(time.Second), // to the response headers; bound the body with the request's context
	)}

	call("heimdall", before.Do, http.MethodGet)
	call("gotry", after.Do, http.MethodGet)
	// Output:
	// heimdall GET: 200 hello after 2 requests
	// gotry GET: 200 hello after 2 requests
}

// failsafe-go's HTTP retry policy and gotry configured alike: 3 attempts, a
// backoff doubling from 10ms to at most 100ms, the last response returned
// when retries run out. failsafe-go needs two additions for that: by
// default it returns a retrypolicy.ExceededError instead of the last
// response (ReturnLastFailure), and it does not close the body of a
// response it retries (the listener). gotry does both by default.
func Example_failsafe() {
	// Before.
	retries := failsafehttp.NewRetryPolicyBuilder().
		WithMaxAttempts(3).
		WithBackoff(10*time.Millisecond, 100*time.Millisecond).
		ReturnLastFailure().
		OnRetryScheduled(func(e failsafe.ExecutionScheduledEvent[*http.Response]) {
			if r := e.LastResult(); r != nil {
				io.Copy(io.Discard, r.Body)
				r.Body.Close()
			}
		}).
		Build()
	before := &http.Client{Transport: failsafehttp.NewRoundTripper(nil, retries)}

	// After.
	after := &http.Client{Transport: transport.New(nil,
		transport.WithMaxAttempts(3),
		transport.WithBackoff(resilience.Exponential(10*time.Millisecond, 100*time.Millisecond)),
	)}

	call("failsafe-go", before.Do, http.MethodGet)
	call("gotry", after.Do, http.MethodGet)
	// Output:
	// failsafe-go GET: 200 hello after 2 requests
	// gotry GET: 200 hello after 2 requests
}
