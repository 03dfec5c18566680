package transporttest_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/MrVSiK/gotry/clock"
	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
	"github.com/MrVSiK/gotry/transport/transporttest"
)

// get calls url through client and returns "status body", or the error.
func get(client *http.Client, url string) string {
	resp, err := client.Get(url)
	if err != nil {
		return "error: " + err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, b)
}

// gotry retries a 503 and returns the 200 that follows; the RoundTripper
// counts the attempts.
func Example() {
	rt := transporttest.New(transporttest.Steps(
		transporttest.Status(http.StatusServiceUnavailable),
		transporttest.Status(http.StatusOK).WithBody("ok"),
	))
	client := &http.Client{Transport: transport.New(rt,
		transport.WithBackoff(resilience.Constant(0)))} // no sleep between attempts

	fmt.Println(get(client, "http://inventory.test/items"))
	fmt.Println("attempts:", rt.Count())
	// Output:
	// 200 ok
	// attempts: 2
}

// A test asserts how many attempts gotry made and what each carried: here
// every attempt fails, so gotry stops after its 3 attempts and returns the
// last 503. In a test, compare rt.Count() and the records with what you
// expect and call t.Errorf.
func ExampleRoundTripper_Requests() {
	rt := transporttest.New(transporttest.Steps(
		transporttest.Status(http.StatusServiceUnavailable).WithBody("busy")))
	client := &http.Client{Transport: transport.New(rt,
		transport.WithMaxAttempts(3),
		transport.WithBackoff(resilience.Constant(0)),
		transport.WithAttemptHeader("X-Attempt"))}

	fmt.Println(get(client, "http://inventory.test/items"))
	for _, r := range rt.Requests() {
		fmt.Println(r.N, r.Method, r.URL.Path, r.Header.Get("X-Attempt"), r.Step.Status)
	}
	fmt.Println("unclosed bodies:", rt.Unclosed())
	// Output:
	// 503 busy
	// 1 GET /items 1; initial 503
	// 2 GET /items 2; retry 503
	// 3 GET /items 3; retry 503
	// unclosed bodies: 0
}

// A connection reset is retried when the request may be repeated (a GET);
// a POST is sent once, and its caller gets the reset.
func ExampleConnectionReset() {
	rt := transporttest.New(transporttest.Steps(
		transporttest.ConnectionReset(),
		transporttest.Status(http.StatusOK).WithBody("ok"),
	), transporttest.WithKey(func(r *http.Request) string { return r.Method }))
	client := &http.Client{Transport: transport.New(rt, transport.WithBackoff(resilience.Constant(0)))}

	fmt.Println("GET:", get(client, "http://inventory.test/items"))
	_, err := client.Post("http://inventory.test/items", "text/plain", strings.NewReader("x"))
	fmt.Println("POST reset:", errors.Is(err, syscall.ECONNRESET))
	fmt.Println("attempts:", rt.Count())
	// Output:
	// GET: 200 ok
	// POST reset: true
	// attempts: 3
}

// Routes give each endpoint a script, and a count, of its own.
func ExampleRoundTripper_Handle() {
	rt := transporttest.New(nil) // anything not routed fails: the test hears of it
	rt.Handle("GET /stock/{id}", transporttest.Steps(
		transporttest.Status(http.StatusBadGateway),
		transporttest.Status(http.StatusOK).WithBody("7 left")))
	rt.Handle("POST /orders", transporttest.Steps(transporttest.Status(http.StatusServiceUnavailable)))
	client := &http.Client{Transport: transport.New(rt, transport.WithBackoff(resilience.Constant(0)))}

	fmt.Println(get(client, "http://shop.test/stock/42"))
	resp, err := client.Post("http://shop.test/orders", "application/json", strings.NewReader(`{"id":42}`))
	if err == nil {
		resp.Body.Close()
		fmt.Println(resp.StatusCode, "(a POST is not retried)")
	}
	_, err = client.Get("http://shop.test/basket")
	fmt.Println(errors.Is(err, transporttest.ErrNoScript))
	for _, r := range rt.Requests() {
		fmt.Printf("%q attempt %d body %q\n", r.Pattern, r.Attempt, r.Body)
	}
	// Output:
	// 200 7 left
	// 503 (a POST is not retried)
	// true
	// "GET /stock/{id}" attempt 1 body ""
	// "GET /stock/{id}" attempt 2 body ""
	// "POST /orders" attempt 1 body "{\"id\":42}"
	// "" attempt 0 body ""
}

// A script as a function of the attempt's number and request: the first
// attempt is throttled with a Retry-After, which gotry honours.
func ExampleFunc() {
	rt := transporttest.New(transporttest.Func(func(n int, req *http.Request) transporttest.Step {
		if n == 1 {
			return transporttest.Status(http.StatusTooManyRequests).WithHeader("Retry-After", "0")
		}
		return transporttest.Status(http.StatusOK).WithBody("results for " + req.URL.Query().Get("q"))
	}))
	client := &http.Client{Transport: transport.New(rt)}

	fmt.Println(get(client, "http://search.test/?q=gotry"))
	// Output: 200 results for gotry
}

// Latency on the fake clock: the first attempt would take 2 s, so gotry
// hedges after 100 ms, and the hedge answers at once. The test moves the
// clock instead of sleeping, and sees that the slow attempt was cancelled.
func Example_fakeClock() {
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt := transporttest.New(transporttest.Steps(
		transporttest.Status(http.StatusOK).WithBody("slow").After(2*time.Second),
		transporttest.Status(http.StatusOK).WithBody("hedge"),
	), transporttest.WithClock(fake))
	client := &http.Client{Transport: transport.New(rt,
		transport.WithHedging(100*time.Millisecond, 1),
		transport.WithClock(fake))}

	got := make(chan string)
	go func() { got <- get(client, "http://inventory.test/items") }()
	// Two timers: gotry's hedge delay and the first attempt's latency.
	fake.WaitForTimers(2, 10*time.Second)
	fake.Advance(100 * time.Millisecond)
	fmt.Println(<-got)
	for _, r := range rt.Requests() {
		fmt.Println(r.N, r.Step.Body, r.Err)
	}
	// Output:
	// 200 hedge
	// 1 slow context canceled
	// 2 hedge <nil>
}
