package transporttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync"

	"github.com/MrVSiK/gotry/clock"
)

// ErrNoScript is what a request fails with when no script is meant for it:
// no pattern given to Handle matches it and New was given a nil Script. The
// error returned wraps it and names the request's method and URL.
var ErrNoScript = errors.New("transporttest: no script for the request")

// errNilURL is returned for a request without a URL, as http.Transport
// refuses one.
var errNilURL = errors.New("transporttest: nil Request.URL")

// Option configures a RoundTripper.
type Option interface{ apply(*RoundTripper) }

type optionFunc func(*RoundTripper)

func (f optionFunc) apply(rt *RoundTripper) { f(rt) }

// WithClock waits out the steps' latencies on c (default the wall clock;
// nil is ignored). Give it the clock.Fake that gotry runs on
// (transport.WithClock) and move both with Advance.
func WithClock(c clock.Clock) Option {
	return optionFunc(func(rt *RoundTripper) {
		if c != nil {
			rt.clock = c
		}
	})
}

// WithKey splits each script's count by key(req): the requests of one key
// run the script from its first step, whatever the requests of other keys
// did (default: one count per script). key is called once per request, may
// be called concurrently and must not modify the request; its result is
// recorded in Request.Key. nil is ignored.
func WithKey(key func(req *http.Request) string) Option {
	return optionFunc(func(rt *RoundTripper) {
		if key != nil {
			rt.key = key
		}
	})
}

// RoundTripper is a scripted http.RoundTripper: see the package doc for the
// model. Make one with New; it is safe for concurrent use.
type RoundTripper struct {
	clock clock.Clock
	key   func(*http.Request) string
	mux   *http.ServeMux // Handle's patterns, each to a *route; safe for concurrent use itself
	def   *route         // New's script

	mu sync.Mutex // guards the fields below, and every route's counts
	// requests holds every request received, in order of arrival.
	requests []Request
	// unclosed counts the response bodies returned and not yet closed.
	unclosed int
}

var _ http.RoundTripper = (*RoundTripper)(nil)

// route is a script and its counts, one per key.
type route struct {
	pattern string
	script  Script         // nil: fail with ErrNoScript
	counts  map[string]int // key → requests counted so far; guarded by RoundTripper.mu
}

// ServeHTTP is never called: a route is an http.Handler only so that the
// RoundTripper's ServeMux can hold it.
func (*route) ServeHTTP(http.ResponseWriter, *http.Request) {}

// New returns a RoundTripper that runs script for every request no pattern
// given to Handle matches. A nil script makes such requests fail with an
// error matching ErrNoScript: a test that scripts every route it expects
// then learns of any other. Nil options are ignored.
func New(script Script, opts ...Option) *RoundTripper {
	rt := &RoundTripper{
		clock: clock.Real(),
		mux:   http.NewServeMux(),
		def:   &route{script: script, counts: map[string]int{}},
	}
	for _, o := range opts {
		if o != nil {
			o.apply(rt)
		}
	}
	return rt
}

// Handle routes the requests that pattern matches to script, on a count of
// their own. Patterns are http.ServeMux's ("GET /items/{id}",
// "example.test/", "POST /pay") and match as ServeMux matches them, the
// most specific winning, with two differences: a request without a path
// matches as "/", and a request that ServeMux would redirect (to add a
// trailing slash or clean its path) matches none. Handle panics, as
// ServeMux.Handle does, on an invalid pattern or one that conflicts with an
// earlier one, and on a nil script. It may be called while requests are in
// flight; it applies to the requests that arrive after it returns.
func (rt *RoundTripper) Handle(pattern string, script Script) {
	if script == nil {
		panic("transporttest: Handle(" + pattern + "): nil script")
	}
	rt.mux.Handle(pattern, &route{pattern: pattern, script: script, counts: map[string]int{}})
}

// RoundTrip records req, asks its script for a step and does what the step
// says. It reads req's body to the end and closes it, on every path; it
// returns a response (never with http.NoBody for a body) or an error,
// never both and never neither.
func (rt *RoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	body, readErr := drain(req.Body)
	if req.URL == nil {
		return nil, errNilURL
	}
	r := rt.match(req)
	key := ""
	if rt.key != nil {
		key = rt.key(req) // user code: before the lock
	}
	ctx := req.Context()
	i, n := rt.arrive(req, r, key, body, ctx.Err() == nil && readErr == nil)
	resp, err := rt.answer(ctx, req, r, n, body, readErr, i)
	rt.done(i, err)
	return resp, err
}

// answer runs request i's step: it asks r's script for the nth request's
// step and waits out its latency, or fails at once when the body could not
// be read, the context has ended or there is no script (n is then 0).
func (rt *RoundTripper) answer(ctx context.Context, req *http.Request, r *route, n int, body []byte, readErr error, i int) (*http.Response, error) {
	switch {
	case readErr != nil:
		return nil, fmt.Errorf("transporttest: reading the request body: %w", readErr)
	case ctx.Err() != nil:
		return nil, ctx.Err() // never sent, as http.Transport does not send it
	case r.script == nil:
		return nil, fmt.Errorf("%w: %s %s", ErrNoScript, method(req), req.URL.Redacted())
	}
	trace := httptrace.ContextClientTrace(ctx)
	wrote(trace)
	step := r.script.Step(n, replayable(req, body)) // user code: outside the lock
	rt.chose(i, step)
	if err := rt.wait(ctx, &step); err != nil {
		return nil, err
	}
	if step.Err != nil {
		return nil, step.Err
	}
	code := step.status()
	if code < 100 || code > 599 {
		return nil, fmt.Errorf("transporttest: step status %d is not in 100..599", step.Status)
	}
	if trace != nil && trace.GotFirstResponseByte != nil {
		trace.GotFirstResponseByte()
	}
	return rt.respond(req, &step, code), nil
}

// wrote reports to trace (nil: none) that the request, body included, has
// been written, as http.Transport does once it has sent it: gotry's
// per-attempt header timeout starts from WroteRequest.
func wrote(trace *httptrace.ClientTrace) {
	if trace == nil {
		return
	}
	if trace.WroteHeaders != nil {
		trace.WroteHeaders()
	}
	if trace.WroteRequest != nil {
		trace.WroteRequest(httptrace.WroteRequestInfo{})
	}
}

// wait waits out the step's latency, or until ctx ends for a step that
// hangs. It returns ctx's error when ctx ends first, or has ended by the
// time the answer is due.
func (rt *RoundTripper) wait(ctx context.Context, step *Step) error {
	switch {
	case step.Hang:
		<-ctx.Done()
	case step.Latency > 0:
		t := rt.clock.NewTimer(step.Latency)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
		}
	}
	return ctx.Err()
}

// respond builds the step's response to req.
func (rt *RoundTripper) respond(req *http.Request, step *Step, code int) *http.Response {
	h := step.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	rt.mu.Lock()
	rt.unclosed++
	rt.mu.Unlock()
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", code, http.StatusText(code)),
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          &body{rt: rt, r: bytes.NewReader([]byte(step.Body))},
		ContentLength: int64(len(step.Body)),
		Request:       req,
	}
}

// match returns the route for req: the pattern that matches it, or New's
// script.
func (rt *RoundTripper) match(req *http.Request) *route {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	path := req.URL.Path
	if path == "" {
		path = "/"
	}
	m := &http.Request{Method: method(req), Host: host, URL: &url.URL{Path: path, RawPath: req.URL.RawPath}}
	if h, _ := rt.mux.Handler(m); h != nil {
		if r, ok := h.(*route); ok {
			return r
		}
	}
	return rt.def
}

// method returns req's method, GET for "" as http.Transport sends it.
func method(req *http.Request) string {
	if req.Method == "" {
		return http.MethodGet
	}
	return req.Method
}

// drain reads b to its end and closes it; nil and http.NoBody read as no
// body.
func drain(b io.ReadCloser) ([]byte, error) {
	if b == nil || b == http.NoBody {
		return nil, nil
	}
	data, err := io.ReadAll(b)
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	return data, err
}

// replayable returns the request a script sees: req with its body, which
// drain consumed, readable again.
func replayable(req *http.Request, data []byte) *http.Request {
	if data == nil {
		return req
	}
	r := *req
	r.Body = io.NopCloser(bytes.NewReader(data))
	return &r
}
