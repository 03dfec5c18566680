package transport_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// memBase answers every request from memory: it measures the wrapper alone.
type memBase struct{}

func (memBase) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
}

// benchCases are the configurations compared against the bare base. Each
// group's "bare" entry is the baseline the ratios in the README are taken
// against (make bench prints them).
func benchCases(base http.RoundTripper) []struct {
	name string
	rt   http.RoundTripper
} {
	return []struct {
		name string
		rt   http.RoundTripper
	}{
		{"bare", base},
		{"defaults", transport.New(base)},
		{"hedging-armed", transport.New(base, transport.WithHedging(time.Second, 1))},
		{"breaker+budget+timeout", transport.New(base,
			transport.WithCircuitBreaker(resilience.BreakerConfig{}),
			transport.WithPerAttemptTimeout(time.Second))},
	}
}

func BenchmarkInMemory(b *testing.B) {
	req, _ := http.NewRequest(http.MethodGet, "http://bench.local/item", nil)
	for _, c := range benchCases(memBase{}) {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := c.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}

func BenchmarkInMemoryParallel(b *testing.B) {
	req, _ := http.NewRequest(http.MethodGet, "http://bench.local/item", nil)
	for _, c := range benchCases(memBase{}) {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := c.rt.RoundTrip(req)
					if err != nil {
						b.Error(err)
						return
					}
					resp.Body.Close()
				}
			})
		})
	}
}

func BenchmarkLoopback(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	base := &http.Transport{MaxIdleConnsPerHost: 64}
	defer base.CloseIdleConnections()
	for _, c := range benchCases(base) {
		b.Run(c.name, func(b *testing.B) {
			client := &http.Client{Transport: c.rt}
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Get(srv.URL)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// BenchmarkInterleaved alternates a bare request and a gotry (defaults)
// request in every iteration, timing each, so drift on a shared machine hits
// both alike; it reports both times and their ratio.
func BenchmarkInterleaved(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	loop := &http.Transport{MaxIdleConnsPerHost: 64}
	defer loop.CloseIdleConnections()
	for _, c := range []struct {
		name string
		base http.RoundTripper
		url  string
	}{
		{"in-memory", memBase{}, "http://bench.local/item"},
		{"loopback", loop, srv.URL},
	} {
		b.Run(c.name, func(b *testing.B) {
			bare, gotry := c.base, transport.New(c.base)
			req, _ := http.NewRequest(http.MethodGet, c.url, nil)
			var tBare, tGotry time.Duration
			one := func(rt http.RoundTripper) time.Duration {
				start := time.Now()
				resp, err := rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return time.Since(start)
			}
			for i := 0; b.Loop(); i++ {
				if i%2 == 0 { // alternate which goes first
					tBare += one(bare)
					tGotry += one(gotry)
				} else {
					tGotry += one(gotry)
					tBare += one(bare)
				}
			}
			n := float64(b.N)
			b.ReportMetric(float64(tBare.Nanoseconds())/n, "bare-ns/op")
			b.ReportMetric(float64(tGotry.Nanoseconds())/n, "gotry-ns/op")
			b.ReportMetric(float64(tGotry)/float64(tBare), "x-bare")
		})
	}
}

// BenchmarkRetriedRequestConnections: each request gets a 503 with a small
// body, then a 200, over loopback, through a base with an empty pool (a new
// http.Transport per request), so conns/op is the TCP connections one retried
// request needs. A superseded response that holds its connection through the
// retry forces the retry onto a second one; one released at once lets the
// retry reuse it.
func BenchmarkRetriedRequestConnections(b *testing.B) {
	var hits, conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1)%2 == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "try again later")
			return
		}
		io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		base := &http.Transport{}
		client := &http.Client{Transport: transport.New(base, transport.WithBudget(0, 0),
			transport.WithBackoff(resilience.Constant(0)))}
		resp, err := client.Get(srv.URL)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		base.CloseIdleConnections()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	b.ReportMetric(float64(conns.Load())/float64(b.N), "conns/op")
}
