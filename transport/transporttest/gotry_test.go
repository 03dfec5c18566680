package transporttest_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/clock"
	"github.com/MrVSiK/gotry/internal/testwait"
	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
	"github.com/MrVSiK/gotry/transport/transporttest"
)

// The kit under gotry, on the fake clock: what a user's test sees.

// getAsync sends a GET through client on its own goroutine.
func getAsync(t *testing.T, client *http.Client, url string) <-chan result {
	req := newRequest(t, context.Background(), http.MethodGet, url, nil)
	ch := make(chan result, 1)
	go func() {
		resp, err := client.Do(req)
		ch <- result{resp, err}
	}()
	return ch
}

// The kit reports the request written, as http.Transport does, so gotry's
// per-attempt header timeout cuts off an attempt that hangs.
func TestHeaderTimeoutRunsOverTheKit(t *testing.T) {
	fake := clock.NewFake(testwait.Epoch)
	rt := transporttest.New(transporttest.Steps(transporttest.Hang(), transporttest.Status(200).WithBody("ok")),
		transporttest.WithClock(fake))
	client := &http.Client{Transport: transport.New(rt,
		transport.WithPerAttemptHeaderTimeout(time.Second),
		transport.WithBackoff(resilience.Constant(0)),
		transport.WithClock(fake))}
	ch := getAsync(t, client, "http://a.test/")
	if !fake.WaitForTimers(1, testwait.Limit) {
		t.Fatal("gotry armed no header timer: the kit did not report the request written")
	}
	fake.Advance(time.Second)
	r := testwait.Recv(t, ch, "the retried request")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if body := readAll(t, r.resp); body != "ok" || rt.Count() != 2 {
		t.Errorf("body %q after %d attempts, want ok after 2", body, rt.Count())
	}
	if first := rt.Requests()[0]; !errors.Is(first.Err, context.Canceled) {
		t.Errorf("the hung attempt ended with %v, want its context's cancellation", first.Err)
	}
}

// gotry waits out a Retry-After the kit sends, on the fake clock.
func TestRetryAfterOnTheFakeClock(t *testing.T) {
	fake := clock.NewFake(testwait.Epoch)
	rt := transporttest.New(transporttest.Steps(
		transporttest.Status(503).WithHeader("Retry-After", "2"),
		transporttest.Status(200)))
	client := &http.Client{Transport: transport.New(rt, transport.WithClock(fake))}
	ch := getAsync(t, client, "http://a.test/")
	if !fake.WaitForTimers(1, testwait.Limit) {
		t.Fatal("gotry did not sleep")
	}
	fake.Advance(2*time.Second - time.Nanosecond)
	testwait.None(t, ch, "answer before the Retry-After passed")
	if n := rt.Count(); n != 1 {
		t.Fatalf("%d attempts during the Retry-After, want 1", n)
	}
	fake.Advance(time.Nanosecond)
	r := testwait.Recv(t, ch, "the retried request")
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.resp.Body.Close()
	if r.resp.StatusCode != 200 || rt.Count() != 2 {
		t.Errorf("status %d after %d attempts, want 200 after 2", r.resp.StatusCode, rt.Count())
	}
}

// Two attempts answer in the same instant: gotry returns one response and
// closes the other's body; the kit sees every body closed once the caller
// has closed its own.
func TestGotryClosesTheLosersBody(t *testing.T) {
	fake := clock.NewFake(testwait.Epoch)
	rt := transporttest.New(transporttest.Steps(
		transporttest.Status(200).WithBody("first").After(time.Second),
		transporttest.Status(200).WithBody("hedge").After(900*time.Millisecond),
	), transporttest.WithClock(fake))
	client := &http.Client{Transport: transport.New(rt,
		transport.WithHedging(100*time.Millisecond, 1),
		transport.WithClock(fake))}
	ch := getAsync(t, client, "http://a.test/")
	if !fake.WaitForTimers(2, testwait.Limit) { // the hedge delay, the first attempt's latency
		t.Fatal("timers not armed")
	}
	armed := fake.Armed()
	fake.Advance(100 * time.Millisecond)
	if !fake.WaitForArmed(armed+1, testwait.Limit) { // the hedge's latency
		t.Fatal("the hedge was not sent")
	}
	fake.Advance(900 * time.Millisecond) // both answer now
	r := testwait.Recv(t, ch, "the response")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if body := readAll(t, r.resp); body != "first" && body != "hedge" {
		t.Errorf("body %q", body)
	}
	// The loser is released on gotry's own goroutine, possibly just after
	// Do returned.
	waitFor(t, func() bool {
		for _, q := range rt.Requests() {
			if !q.Done {
				return false
			}
		}
		return rt.Unclosed() == 0
	})
	if n := rt.Count(); n != 2 {
		t.Errorf("%d attempts, want 2", n)
	}
}
