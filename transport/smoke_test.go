package transport

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/resilience"
)

func TestSmoke(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) < 3 {
			w.WriteHeader(503)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	c := &http.Client{Transport: New(nil, WithBackoff(resilience.Constant(time.Millisecond)))}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" || n.Load() != 3 {
		t.Fatalf("%q %d", b, n.Load())
	}
	n.Store(0)
	c = &http.Client{Transport: New(nil, WithHedging(time.Millisecond, 2), WithBackoff(resilience.Constant(time.Millisecond)), WithMaxAttempts(5))}
	resp, err = c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	t.Log(string(b), n.Load())
}
