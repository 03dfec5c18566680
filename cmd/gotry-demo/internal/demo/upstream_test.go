package demo

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"
)

// dropUpstream starts a one-host upstream ("search") whose capacity is down
// for the whole test, with no other faults.
func dropUpstream(t *testing.T, d Drop) (*Upstream, *http.Client) {
	t.Helper()
	d.Host, d.For = "search", time.Hour
	u, err := StartUpstream(UpstreamConfig{Hosts: []string{"search"}, Drop: d})
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{DialContext: u.DialContext}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := u.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		tr.CloseIdleConnections()
	})
	return u, &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// fetch GETs search on its own goroutine and sends the status (0 on an
// error) on the channel.
func fetch(c *http.Client) <-chan int {
	ch := make(chan int, 1)
	go func() {
		resp, err := c.Get("http://search/items/1")
		if err != nil {
			ch <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		ch <- resp.StatusCode
	}()
	return ch
}

// waitQueued waits until the host has n requests waiting or in service.
func waitQueued(t *testing.T, u *Upstream, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for u.hosts[0].queued.Load() != n {
		if time.Now().After(deadline) {
			t.Fatalf("queued %d, want %d", u.hosts[0].queued.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCapacityDropQueuesThenRefuses: under a capacity drop the host serves
// Capacity requests at once, queues up to Queue more, and answers a request
// past that 503 at once; the queued one is served after the first.
func TestCapacityDropQueuesThenRefuses(t *testing.T) {
	u, c := dropUpstream(t, Drop{Capacity: 1, Service: 2 * time.Second, Queue: 1}) // long: the third request arrives while both are held
	first := fetch(c)
	waitQueued(t, u, 1)
	second := fetch(c)
	waitQueued(t, u, 2)
	if got := <-fetch(c); got != http.StatusServiceUnavailable {
		t.Errorf("a request past the queue got %d, want 503 at once", got)
	}
	for i, ch := range []<-chan int{first, second} {
		if got := <-ch; got != http.StatusOK {
			t.Errorf("request %d got %d, want 200", i+1, got)
		}
	}
	served := u.Served()["search"]
	if served["capped"] != 2 || served["queue-full"] != 1 {
		t.Errorf("served %v, want capped 2 and queue-full 1", served)
	}
	if !u.DropActive("search", time.Now()) || u.DropActive("other", time.Now()) {
		t.Errorf("DropActive: want true for search only")
	}
}

// TestCapacityDropCostsAbandonedRequests: a request whose client gave up
// still takes its service time, so the one queued behind it waits for it,
// as on a real server.
func TestCapacityDropCostsAbandonedRequests(t *testing.T) {
	u, c := dropUpstream(t, Drop{Capacity: 1, Service: time.Second, Queue: 4})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://search/items/1", nil)
	gone := make(chan error, 1)
	go func() {
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		gone <- err
	}()
	waitQueued(t, u, 1)
	cancel()
	if err := <-gone; err == nil {
		t.Fatal("the cancelled request got an answer")
	}
	if n := u.hosts[0].queued.Load(); n != 1 {
		t.Fatalf("queued %d once its client left, want 1: it is still being served", n)
	}
	if got := <-fetch(c); got != http.StatusOK {
		t.Errorf("the next request got %d, want 200", got)
	}
	if served := u.Served()["search"]; served["capped"] != 2 {
		t.Errorf("served %v, want both requests served under the drop", served)
	}
}

// TestCapacityDropShutdownEndsTheQueue: Shutdown does not wait out a queue
// of long service times.
func TestCapacityDropShutdownEndsTheQueue(t *testing.T) {
	u, err := StartUpstream(UpstreamConfig{Hosts: []string{"search"},
		Drop: Drop{Host: "search", For: time.Hour, Capacity: 1, Service: time.Hour, Queue: 4}})
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{DialContext: u.DialContext}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	a, b := fetch(c), fetch(c)
	waitQueued(t, u, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := u.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Shutdown waited out its deadline")
	}
	<-a
	<-b
}
