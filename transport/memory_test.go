package transport_test

import (
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// memoryHosts is how many distinct hosts TestBreakersStayBoundedOverManyHosts
// sends to: GOTRY_MEMORY_HOSTS, or 200,000 (make soak runs 1,000,000, about
// 10s without -race; 200,000 take about 10s with -race).
func memoryHosts(t *testing.T) int {
	v := os.Getenv("GOTRY_MEMORY_HOSTS")
	if v == "" {
		return 200_000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("GOTRY_MEMORY_HOSTS=%q: want a positive number", v)
	}
	return n
}

// TestBreakersStayBoundedOverManyHosts sends one request to each of a great
// many distinct hosts (h123.test, through an in-memory base: no DNS, no
// sockets) with the breaker on. The number of tracked breakers stays within
// the bound (WithMaxKeys) all the way, the heap stops growing once the bound is reached,
// and the cost of a tracked host is logged.
func TestBreakersStayBoundedOverManyHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("memory test: skipped with -short")
	}
	hosts := memoryHosts(t)
	tests := []struct {
		name     string
		maxHosts int // 0: the default
		bound    int
		hosts    int
	}{
		{"default bound", 0, resilience.DefaultMaxKeys, hosts},
		{"WithMaxKeys 20000", 20_000, 20_000, hosts / 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hosts := tc.hosts
			ok := &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Header: http.Header{}}
			base := baseFunc(func(r *http.Request) (*http.Response, error) {
				resp := *ok
				resp.Request = r
				return &resp, nil
			})
			heapStart := settledHeap()
			opts := []transport.Option{transport.WithBreaker(resilience.BreakerConfig{})}
			if tc.maxHosts > 0 {
				opts = append(opts, transport.WithMaxKeys(tc.maxHosts))
			}
			tr := transport.New(base, opts...)
			tracked := func() int {
				return len(tr.Stats().Hosts)
			}
			var heapHalf uint64
			for i := range hosts {
				req := &http.Request{Method: http.MethodGet, Header: http.Header{},
					URL: &url.URL{Scheme: "http", Host: "h" + strconv.Itoa(i) + ".test", Path: "/"}}
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				resp.Body.Close()
				if (i+1)%(hosts/10+1) == 0 {
					if n := tracked(); n > tc.bound {
						t.Fatalf("after %d hosts: %d breakers tracked, bound %d", i+1, n, tc.bound)
					}
				}
				if i+1 == hosts/2 {
					heapHalf = settledHeap()
				}
			}
			n := tracked()
			heapEnd := settledHeap()
			runtime.KeepAlive(tr)
			perHost := float64(heapEnd-min(heapStart, heapEnd)) / float64(max(n, 1))
			t.Logf("%d hosts: %d breakers tracked (bound %d); heap %.1f MiB at start, %.1f MiB halfway, %.1f MiB at the end: %.0f bytes per tracked host",
				hosts, n, tc.bound, mib(heapStart), mib(heapHalf), mib(heapEnd), perHost)
			switch {
			case n > tc.bound:
				t.Fatalf("%d breakers tracked, bound %d", n, tc.bound)
			case hosts >= 2*tc.bound && n < tc.bound/2:
				t.Fatalf("only %d breakers tracked of %d allowed: eviction is far too eager", n, tc.bound)
			case perHost > 2048:
				t.Fatalf("%.0f bytes of heap per tracked host", perHost)
			}
			// Once the bound is reached, more hosts cost nothing: the
			// second half of the run adds at most 25% (plus 1 MiB of noise).
			if hosts >= 4*tc.bound && float64(heapEnd) > 1.25*float64(heapHalf)+(1<<20) {
				t.Fatalf("heap grew from %.1f MiB halfway to %.1f MiB at the end with the breaker count bounded", mib(heapHalf), mib(heapEnd))
			}
		})
	}
}
