package clock_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/MrVSiK/gotry/clock"
	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// upstream answers 503 to the first request and 200 to the others, from
// memory.
type upstream struct{ calls atomic.Int32 }

func (u *upstream) RoundTrip(r *http.Request) (*http.Response, error) {
	code := http.StatusOK
	if u.calls.Add(1) == 1 {
		code = http.StatusServiceUnavailable
	}
	return &http.Response{StatusCode: code, Body: http.NoBody, Request: r}, nil
}

// A test of a client's retry behaviour that never sleeps: the client
// backs off for 2 s after a 503, and the test moves a fake clock past
// the backoff instead of waiting for it.
func Example() {
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	up := &upstream{}
	client := &http.Client{Transport: transport.New(up,
		transport.WithBackoff(resilience.Constant(2*time.Second)),
		transport.WithClock(fake))}

	status := make(chan int)
	go func() {
		resp, err := client.Get("http://inventory.test/items")
		if err != nil {
			status <- 0
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()

	fake.WaitForTimers(1, 10*time.Second) // the client is in its backoff
	fmt.Println("attempts before the backoff:", up.calls.Load())
	fake.Advance(2 * time.Second)
	fmt.Println("status:", <-status, "attempts:", up.calls.Load())
	// Output:
	// attempts before the backoff: 1
	// status: 200 attempts: 2
}
