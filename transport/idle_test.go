package transport_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/transport"
)

// TestCloseIdleConnectionsReachesTheBase: http.Client.CloseIdleConnections
// through a Transport closes the base's idle connection to a real server.
func TestCloseIdleConnectionsReachesTheBase(t *testing.T) {
	closed := make(chan struct{}, 1)
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok"))
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			closed <- struct{}{}
		}
	}
	s.Start()
	defer s.Close()

	client := &http.Client{Transport: transport.New(newBase(t))}
	resp, err := client.Do(newRequest(t, context.Background(), http.MethodGet, s.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	if body := readBody(t, resp); body != "ok" {
		t.Fatalf("body %q", body)
	}
	select {
	case <-closed:
		t.Fatal("connection closed before CloseIdleConnections")
	default:
	}
	client.CloseIdleConnections()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the idle connection was not closed")
	}
}

type idleCounter struct {
	http.RoundTripper
	calls int
}

func (c *idleCounter) CloseIdleConnections() { c.calls++ }

func TestCloseIdleConnectionsForwardsOnlyWhenTheBaseCan(t *testing.T) {
	counter := &idleCounter{RoundTripper: roundTripperFunc(nil)}
	transport.New(counter).CloseIdleConnections()
	if counter.calls != 1 {
		t.Fatalf("base's CloseIdleConnections called %d times, want 1", counter.calls)
	}
	// A base without the method: nothing to forward to, and no panic.
	transport.New(roundTripperFunc(func(*http.Request) (*http.Response, error) { return nil, nil })).CloseIdleConnections()
}
