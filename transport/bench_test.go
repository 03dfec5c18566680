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

// The benchmarks here measure what issue #13 measures: application code
// calling (&http.Client{Transport: rt}).Do(req), side by side with the bare
// base in the same run. `make bench` pipes them through internal/benchratio,
// which prints each group's cases against its "bare" case and checks the
// issue's targets; the case names below are the ones it looks for.

// memBase answers every request from memory: it measures the wrapper alone.
type memBase struct{}

func (memBase) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: emptyBody{}, Request: r}, nil
}

// emptyBody is an empty response body that is not http.NoBody: gotry
// finishes a NoBody response at once, unwrapped, and a response with a body
// to read is the case these benchmarks measure. (A value of no size: no
// allocation.)
type emptyBody struct{}

func (emptyBody) Read([]byte) (int, error) { return 0, io.EOF }
func (emptyBody) Close() error             { return nil }

// armed is gotry with every protection armed on the success path, as the
// issue defines it: a breaker, hedging that never fires (the base answers
// long before 1s) and a per-attempt timeout.
func armed(base http.RoundTripper) http.RoundTripper {
	return transport.New(base,
		transport.WithBreaker(resilience.BreakerConfig{}),
		transport.WithHedging(time.Second, 1),
		transport.WithPerAttemptTimeout(5*time.Second))
}

// benchCase is one configuration compared against the bare base.
type benchCase struct {
	name string
	rt   http.RoundTripper
}

// benchCases are the configurations of every in-memory and loopback group,
// bare first. "breaker+timeout" is armed without hedging: the difference
// between it and "armed" is what hedging alone costs. "armed-floor" is not
// gotry: it prices the parts of armed that any implementation of its
// semantics needs (see armedFloor).
func benchCases(base http.RoundTripper) []benchCase {
	return []benchCase{
		{"bare", base},
		{"defaults", transport.New(base)},
		{"breaker+timeout", transport.New(base,
			transport.WithBreaker(resilience.BreakerConfig{}),
			transport.WithPerAttemptTimeout(5*time.Second))},
		{"armed", armed(base)},
		{"armed-floor", newArmedFloor(base)},
	}
}

// do sends req through c, as application code does, and reads the
// response to its end.
func do(c *http.Client, req *http.Request) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err
}

// BenchmarkInMemory is the sequential measure: one goroutine, the
// in-memory base, through an *http.Client.
func BenchmarkInMemory(b *testing.B) {
	req, _ := http.NewRequest(http.MethodGet, "http://bench.local/item", nil)
	for _, c := range benchCases(memBase{}) {
		b.Run(c.name, func(b *testing.B) {
			client := &http.Client{Transport: c.rt}
			b.ReportAllocs()
			for b.Loop() {
				if err := do(client, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkInMemoryNewRequest is BenchmarkInMemory with a new request per
// call, as application code usually builds one (http.NewRequest: 4 more
// allocations and ~200 ns in bare). Issue #13's table measured bare this
// way (≈ 645 ns, 9 allocations); BenchmarkInMemory reuses one request, the
// stricter measure, and is the one `make bench` checks the targets on.
func BenchmarkInMemoryNewRequest(b *testing.B) {
	for _, c := range benchCases(memBase{}) {
		b.Run(c.name, func(b *testing.B) {
			client := &http.Client{Transport: c.rt}
			b.ReportAllocs()
			for b.Loop() {
				req, err := http.NewRequest(http.MethodGet, "http://bench.local/item", nil)
				if err != nil {
					b.Fatal(err)
				}
				if err := do(client, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkInMemoryParallel is BenchmarkInMemory from GOMAXPROCS goroutines
// sharing one client, so contention on shared state shows as a ratio that
// grows beyond the sequential one.
func BenchmarkInMemoryParallel(b *testing.B) {
	req, _ := http.NewRequest(http.MethodGet, "http://bench.local/item", nil)
	for _, c := range benchCases(memBase{}) {
		b.Run(c.name, func(b *testing.B) {
			client := &http.Client{Transport: c.rt}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := do(client, req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkInMemoryDirect calls RoundTrip directly, without the
// http.Client. It is not what the targets are measured on; it is
// kept because it shows the wrapper's own nanoseconds without the client's
// (about as large as a bare in-memory round trip), which is the number a
// profile of the engine moves, and what a caller that embeds gotry under
// another RoundTripper pays.
func BenchmarkInMemoryDirect(b *testing.B) {
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

// BenchmarkLoopback sends each request through an *http.Client to an
// httptest server over one shared http.Transport.
func BenchmarkLoopback(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	base := &http.Transport{MaxIdleConnsPerHost: 64}
	defer base.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	for _, c := range benchCases(base) {
		b.Run(c.name, func(b *testing.B) {
			client := &http.Client{Transport: c.rt}
			b.ReportAllocs()
			for b.Loop() {
				if err := do(client, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkInterleaved alternates a bare request and a gotry (defaults)
// request through an *http.Client in every iteration, timing each, so drift
// on a shared machine hits both alike; it reports both times and their
// ratio.
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
			bare := &http.Client{Transport: c.base}
			gotry := &http.Client{Transport: transport.New(c.base)}
			req, _ := http.NewRequest(http.MethodGet, c.url, nil)
			var tBare, tGotry time.Duration
			one := func(client *http.Client) time.Duration {
				start := time.Now()
				if err := do(client, req); err != nil {
					b.Fatal(err)
				}
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
		client := &http.Client{Transport: transport.New(base, transport.WithRetryBudget(0, 0),
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
