package transporttest_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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

// An upload through gotry to a server behind a link that carries 4 MiB a
// second up and answers at loopback speed. The server reports what it
// received; the link's pacing makes the 1 MiB take a quarter of a second
// (less the chunk and the credit the link may run ahead by), however idle
// the machine.
func ExampleSlowLink() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			return // cut off
		}
		fmt.Fprintf(w, "%d %x", n, h.Sum(nil))
	}))
	defer srv.Close()
	// In a test: link := transporttest.StartSlowLink(t, addr, 4<<20, 0).
	link, err := transporttest.NewSlowLink(srv.Listener.Addr().String(), 4<<20, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer link.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: transport.New(base, transport.WithPerAttemptHeaderTimeout(time.Second))}

	body := bytes.Repeat([]byte("gotry "), 1<<20/6+1)[:1<<20]
	start := time.Now()
	resp, err := client.Post(link.URL(), "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		fmt.Println(err)
		return
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.Status)
	fmt.Println("uploaded 1 MiB, server has it:", string(got) == fmt.Sprintf("%d %x", len(body), sha256.Sum256(body)))
	fmt.Println("at least 200ms:", time.Since(start) >= 200*time.Millisecond)
	// Output:
	// 200 OK
	// uploaded 1 MiB, server has it: true
	// at least 200ms: true
}
