package transport_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// TestPOSTWithoutIdempotencyKeyReachesTheServerAtMostOnce sends a POST with
// a replayable body and no idempotency key under every fault mode of the
// chaos suite, with retries, hedging, per-attempt timeouts and the breaker
// configured, and counts on the server how often each request arrived: at
// most once. The same POST with an Idempotency-Key is the control: where the
// fault is retryable before any response, it does arrive again, so the
// counting would see a repeat.
func TestPOSTWithoutIdempotencyKeyReachesTheServerAtMostOnce(t *testing.T) {
	noLeaksAfter(t)
	var gone atomic.Int32
	type mode struct {
		name string
		h2   bool
		// handler answers every hit; sig is closed when RoundTrip returns.
		handler func(sig <-chan struct{}) http.HandlerFunc
		// repeats reports whether a keyed POST is sent again under cfg.
		repeats func(c seConfig) bool
		// slow modes hang until the caller's deadline ends them; their
		// subtests idle, so they run in parallel.
		slow bool
	}
	always := func(c seConfig) bool { return c.attempts > 1 }
	never := func(seConfig) bool { return false }
	slowRepeats := func(c seConfig) bool { return c.attempts > 1 && (c.timeout > 0 || c.hedges > 0) }
	modes := []mode{
		{"reset before headers", false, func(<-chan struct{}) http.HandlerFunc { return resetBeforeHeaders }, always, false},
		{"reset mid-body", false, partialResponse, never, false},
		{"truncated body", false, func(<-chan struct{}) http.HandlerFunc { return partialResponse(nil) }, never, false},
		{"slow headers", false, func(<-chan struct{}) http.HandlerFunc { return hangUntilGone(&gone) }, slowRepeats, true},
		{"503", false, func(<-chan struct{}) http.HandlerFunc { return answerStatus(503) }, always, false},
		{"429 Retry-After 0", false, func(<-chan struct{}) http.HandlerFunc { return answerStatus(429, "Retry-After", "0") }, always, false},
		{"HTTP/2 503", true, func(<-chan struct{}) http.HandlerFunc { return answerStatus(503) }, always, false},
		{"HTTP/2 stream reset", true, func(<-chan struct{}) http.HandlerFunc {
			return func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }
		}, always, false}, // RST_STREAM INTERNAL_ERROR: retried for a keyed POST, not for the other
		// Whether the keyed control repeats here depends on the error type
		// net/http's HTTP/2 client reports for a lost connection, which
		// differs between Go releases (unknown types are not retried), so
		// only the safety property is asserted for this mode.
		{"HTTP/2 connection closed under the request", true, nil, nil, false},
		{"HTTP/2 slow headers", true, func(<-chan struct{}) http.HandlerFunc { return hangUntilGone(&gone) }, slowRepeats, true},
	}
	for _, m := range modes {
		for _, c := range seConfigs {
			for _, keyed := range []bool{false, true} {
				name := m.name + "/" + c.name + "/no key"
				if keyed {
					name = m.name + "/" + c.name + "/Idempotency-Key (control)"
				}
				t.Run(name, func(t *testing.T) {
					deadline := 10 * time.Second
					if m.slow {
						t.Parallel()
						deadline = 500 * time.Millisecond
					}
					sig := make(chan struct{})
					var srv atomic.Pointer[httptest.Server]
					counts := &seCounts{}
					var handler http.HandlerFunc
					if m.handler != nil {
						handler = m.handler(sig)
					} else {
						// Closes every client connection once the request
						// has arrived: the POST reached the server, then
						// the connection died before any response.
						handler = func(w http.ResponseWriter, r *http.Request) {
							io.Copy(io.Discard, r.Body)
							go srv.Load().CloseClientConnections()
							<-r.Context().Done()
						}
					}
					fs := newFaultServer(t, m.h2, counts.wrap(handler))
					srv.Store(fs.Server)
					l := newLedger(fs.base(t))
					tr := transport.New(l, append(c.opts(), closeOnEnd(sig))...)
					resp, err := sePost(t, tr, fs.URL, "req-1", keyed, deadline)
					if (resp == nil) == (err == nil) {
						t.Fatalf("RoundTrip returned resp=%v err=%v", resp, err)
					}
					l.waitBalanced(t)
					hits := counts.of("req-1")
					switch {
					case !keyed && hits > 1:
						t.Fatalf("a POST without an idempotency key reached the server %d times", hits)
					case keyed && m.repeats == nil:
						// no expectation for the control in this mode
					case keyed && m.repeats(c) && hits < 2:
						t.Fatalf("control: the keyed POST arrived %d times, want a repeat (the fault is retryable)", hits)
					case keyed && !m.repeats(c) && c.hedges == 0 && hits != 1:
						// (With hedging a slow first answer may be hedged.)
						t.Fatalf("control: the keyed POST arrived %d times, want once", hits)
					}
				})
			}
		}
	}
}

// TestPOSTToServerClosingIdleConnectionsIsNeverRepeated sends POSTs, one
// after another, to a server that drops idle connections just as the client
// may reuse them: each one arrives at most once (a POST on a dead connection
// fails without a retry, and that failure is allowed).
func TestPOSTToServerClosingIdleConnectionsIsNeverRepeated(t *testing.T) {
	noLeaksAfter(t)
	for _, c := range seConfigs {
		t.Run(c.name, func(t *testing.T) {
			counts := &seCounts{}
			srv := httptest.NewUnstartedServer(counts.wrap(answerOK))
			srv.Config.IdleTimeout = 15 * time.Millisecond
			srv.Start()
			t.Cleanup(srv.Close)
			b := &http.Transport{}
			t.Cleanup(b.CloseIdleConnections)
			l := newLedger(b)
			tr := transport.New(l, c.opts()...)
			const n = 16
			for i := range n {
				id := "req-" + strconv.Itoa(i)
				resp, err := sePost(t, tr, srv.URL, id, false, 10*time.Second)
				if (resp == nil) == (err == nil) {
					t.Fatalf("RoundTrip returned resp=%v err=%v", resp, err)
				}
				if hits := counts.of(id); hits > 1 {
					t.Fatalf("POST %s reached the server %d times", id, hits)
				}
				time.Sleep(time.Duration(i%4) * 8 * time.Millisecond) // around the idle timeout
			}
			l.waitBalanced(t)
			if counts.total() == 0 {
				t.Fatal("no POST reached the server: the test proves nothing")
			}
		})
	}
}

// seConfig is a transport configuration the side-effect tests run under.
type seConfig struct {
	name     string
	attempts int
	hedges   int
	timeout  time.Duration
	breaker  bool
}

var seConfigs = []seConfig{
	{name: "defaults", attempts: transport.DefaultMaxAttempts},
	{name: "retries", attempts: 6},
	{name: "hedging", attempts: 4, hedges: 3},
	{name: "timeouts, hedging and retries", attempts: 5, hedges: 2, timeout: time.Second},
	{name: "breaker and retries", attempts: 4, breaker: true},
}

func (c seConfig) opts() []transport.Option {
	opts := []transport.Option{transport.WithMaxAttempts(c.attempts), transport.WithRetryBudget(0, 0),
		transport.WithBackoff(resilience.Constant(0))}
	if c.hedges > 0 {
		opts = append(opts, transport.WithHedging(10*time.Millisecond, c.hedges))
	}
	if c.timeout > 0 {
		opts = append(opts, transport.WithPerAttemptTimeout(c.timeout))
	}
	if c.breaker {
		opts = append(opts, transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 2}))
	}
	return opts
}

// sePost sends a POST carrying id, with a body http.NewRequest can replay,
// under deadline, and reads and closes the response.
func sePost(t *testing.T, tr http.RoundTripper, url, id string, keyed bool, deadline time.Duration) (*http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"order":"`+id+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	if req.GetBody == nil {
		t.Fatal("the POST body is not replayable: the test would prove nothing")
	}
	req.Header.Set("X-Request-ID", id)
	if keyed {
		req.Header.Set("Idempotency-Key", id)
	}
	resp, err := tr.RoundTrip(req)
	if resp != nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// seCounts counts, on the server, the arrivals of each X-Request-ID.
type seCounts struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *seCounts) wrap(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		if c.m == nil {
			c.m = map[string]int{}
		}
		c.m[r.Header.Get("X-Request-ID")]++
		c.mu.Unlock()
		h(w, r)
	}
}

func (c *seCounts) of(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[id]
}

func (c *seCounts) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.m {
		n += v
	}
	return n
}

// TestTransportWritesNothing pins that the transport itself never logs or
// prints: requests carrying a secret header and body, through retries,
// hedges, timeouts, a breaker that opens and a give-up, leave the standard
// logger, slog's default logger, stdout and stderr untouched, and no error
// the caller gets repeats the header or the body.
func TestTransportWritesNothing(t *testing.T) {
	const secret = "s3cr3t-token-do-not-log"
	var logBuf, slogBuf bytes.Buffer
	oldFlags, oldOut := log.Flags(), log.Writer()
	log.SetOutput(&logBuf)
	oldSlog := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&slogBuf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	stdout, stderr := os.Stdout, os.Stderr
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout, os.Stderr = outW, outW
	captured := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(outR)
		captured <- string(b)
	}()
	restore := func() string {
		os.Stdout, os.Stderr = stdout, stderr
		outW.Close()
		log.SetOutput(oldOut)
		log.SetFlags(oldFlags)
		slog.SetDefault(oldSlog)
		return <-captured
	}
	defer func() {
		if os.Stdout != stdout {
			restore()
		}
	}()

	var n atomic.Int32
	base := baseFunc(func(r *http.Request) (*http.Response, error) {
		io.Copy(io.Discard, r.Body)
		switch n.Add(1) % 5 {
		case 0:
			return memResponse(r, 200, "fine"), nil
		case 1:
			return memResponse(r, 503, "busy", "Retry-After", "0"), nil
		case 2:
			return nil, errMemReset
		case 3:
			select { // slow enough to be hedged or timed out
			case <-time.After(30 * time.Millisecond):
				return memResponse(r, 429, "later", "Retry-After", "0"), nil
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
		}
		return nil, errors.New("permanent failure")
	})
	tr := transport.New(base, transport.WithMaxAttempts(4), transport.WithBackoff(resilience.Constant(0)),
		transport.WithHedging(10*time.Millisecond, 1), transport.WithPerAttemptTimeout(20*time.Millisecond),
		transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 3, OpenDuration: 5 * time.Millisecond}))
	var errs []string
	for i := range 200 {
		method := http.MethodPut
		if i%3 == 0 {
			method = http.MethodPost
		}
		req, _ := http.NewRequest(method, "http://quiet.test/orders", strings.NewReader(`{"card":"`+secret+`"}`))
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	out := restore()
	if logBuf.Len() != 0 || slogBuf.Len() != 0 || out != "" {
		t.Fatalf("the transport wrote: log %q, slog %q, stdout/stderr %q", logBuf.String(), slogBuf.String(), out)
	}
	if len(errs) == 0 {
		t.Fatal("no request failed: the error paths were not exercised")
	}
	for _, e := range errs {
		if strings.Contains(e, secret) {
			t.Fatalf("an error repeats the request's header or body: %s", e)
		}
	}
}
