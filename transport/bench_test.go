package transport_test

import (
	"io"
	"net/http"
	"net/http/httptest"
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
