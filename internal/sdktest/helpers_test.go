package sdktest

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/MrVSiK/gotry/clock"
	"github.com/MrVSiK/gotry/resilience"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// wait bounds how long a test waits for something that must happen: a
// timeout for a failing test, never a synchronisation device.
const wait = 10 * time.Second

// failing is a loopback server that answers its nth request with steps[n-1]
// (the last step repeats), recording every request's body.
type failing struct {
	*httptest.Server
	hits atomic.Int32

	mu     sync.Mutex
	bodies []string
}

func newFailing(t *testing.T, steps ...http.HandlerFunc) *failing {
	f := &failing{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.bodies = append(f.bodies, string(body))
		f.mu.Unlock()
		n := int(f.hits.Add(1))
		steps[min(n, len(steps))-1](w, r)
	}))
	t.Cleanup(func() {
		f.CloseClientConnections()
		f.Close()
	})
	return f
}

func (f *failing) count() int { return int(f.hits.Load()) }

func (f *failing) received() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.bodies...)
}

// status answers code with header pairs kv and no body.
func status(code int, kv ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(kv); i += 2 {
			w.Header().Set(kv[i], kv[i+1])
		}
		w.WriteHeader(code)
	}
}

// reset resets the connection (RST) without a reply, after reading the
// request.
func reset(w http.ResponseWriter, _ *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	conn.(*net.TCPConn).SetLinger(0)
	conn.Close()
}

// newBase returns an http.Transport whose idle connections are closed when
// the test ends.
func newBase(t *testing.T) *http.Transport {
	b := &http.Transport{}
	t.Cleanup(b.CloseIdleConnections)
	return b
}

// advancing moves fc on by step each time a timer is armed on it, until
// stop is closed: it lets Retry-After waits pass at once while an SDK
// drives the requests.
func advancing(t *testing.T, fc *clock.Fake, step time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 1; ; n++ {
			for !fc.WaitForArmed(n, 10*time.Millisecond) {
				select {
				case <-done:
					return
				default:
				}
			}
			fc.Advance(step)
		}
	}()
	return func() { close(done); wg.Wait() }
}

// ends records each call's end.
type ends struct {
	mu sync.Mutex
	e  []resilience.CallEndEvent
}

func (c *ends) add(e resilience.CallEndEvent) {
	c.mu.Lock()
	c.e = append(c.e, e)
	c.mu.Unlock()
}

func (c *ends) get() []resilience.CallEndEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]resilience.CallEndEvent(nil), c.e...)
}
