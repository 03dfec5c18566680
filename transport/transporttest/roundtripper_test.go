package transporttest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/clock"
	"github.com/MrVSiK/gotry/internal/testwait"
	"github.com/MrVSiK/gotry/transport"
	"github.com/MrVSiK/gotry/transport/transporttest"
)

// trackedBody is a request body that records whether it was closed.
type trackedBody struct {
	io.Reader
	mu     sync.Mutex
	closed int
}

func (b *trackedBody) Close() error {
	b.mu.Lock()
	b.closed++
	b.mu.Unlock()
	return nil
}

func (b *trackedBody) closes() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// failingReader fails every read.
type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func newRequest(t *testing.T, ctx context.Context, method, target string, body io.ReadCloser) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Body = body
	return req
}

// roundTrip sends req through rt on its own goroutine.
func roundTrip(rt http.RoundTripper, req *http.Request) <-chan result {
	ch := make(chan result, 1)
	go func() {
		resp, err := rt.RoundTrip(req)
		ch <- result{resp, err}
	}()
	return ch
}

type result struct {
	resp *http.Response
	err  error
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSequenceStepsInOrderThenRepeatsOrFallsBack(t *testing.T) {
	a, b, c := transporttest.Status(500), transporttest.Status(502), transporttest.Status(201)
	tests := []struct {
		name string
		s    transporttest.Sequence
		want []int // statuses for n = 1, 2, ...
	}{
		{"repeats the last", transporttest.Steps(a, b), []int{500, 502, 502, 502}},
		{"then", transporttest.Steps(a, b).Then(c), []int{500, 502, 201, 201}},
		{"empty answers the zero step", transporttest.Steps(), []int{0, 0}},
		{"empty then", transporttest.Steps().Then(c), []int{201, 201}},
		{"one", transporttest.Steps(a), []int{500, 500, 500}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []int
			for n := 1; n <= len(tt.want); n++ {
				got = append(got, tt.s.Step(n, nil).Status)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("statuses %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStepsCopiesItsArguments(t *testing.T) {
	steps := []transporttest.Step{transporttest.Status(503)}
	s := transporttest.Steps(steps...)
	steps[0] = transporttest.Status(200)
	if got := s.Step(1, nil).Status; got != 503 {
		t.Errorf("step 1 status %d after the caller's slice changed, want 503", got)
	}
}

func TestStepWithMethodsLeaveTheReceiverAlone(t *testing.T) {
	base := transporttest.Status(429).WithHeader("Retry-After", "1")
	changed := base.WithHeader("Retry-After", "2").WithBody("slow down").After(time.Second)
	if got := base.Header.Values("Retry-After"); !slices.Equal(got, []string{"1"}) {
		t.Errorf("receiver's Retry-After %v after WithHeader on a copy, want [1]", got)
	}
	if base.Body != "" || base.Latency != 0 {
		t.Errorf("receiver changed: body %q latency %v", base.Body, base.Latency)
	}
	if got := changed.Header.Values("Retry-After"); !slices.Equal(got, []string{"1", "2"}) {
		t.Errorf("copy's Retry-After %v, want [1 2]", got)
	}
	if changed.Body != "slow down" || changed.Latency != time.Second || changed.Status != 429 {
		t.Errorf("copy %+v", changed)
	}
}

// The kit's reset is what gotry's classifier calls a reset connection, so
// it is retried as a real one is.
func TestConnectionResetIsAResetToGotry(t *testing.T) {
	err := transporttest.ConnectionReset().Err
	if c := transport.ClassifyError(err); c != transport.ClassConnectionReset {
		t.Errorf("class %v, want %v", c, transport.ClassConnectionReset)
	}
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("%v does not match syscall.ECONNRESET", err)
	}
	if transporttest.ResetError() == transporttest.ResetError() {
		t.Error("ResetError returned the same value twice; each call must make its own")
	}
}

func TestResponseIsTheStepsAndOwnsItsHeader(t *testing.T) {
	step := transporttest.Status(503).WithHeader("Retry-After", "3").WithBody("busy")
	rt := transporttest.New(transporttest.Steps(step))
	req := newRequest(t, context.Background(), http.MethodGet, "http://a.test/x", nil)
	for i := range 2 {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 503 || resp.Status != "503 Service Unavailable" || resp.Request != req ||
			resp.ContentLength != 4 || resp.ProtoMajor != 1 {
			t.Errorf("response %d: %+v", i, resp)
		}
		if got := resp.Header.Get("Retry-After"); got != "3" {
			t.Errorf("response %d: Retry-After %q, want 3 (a caller changed the step's header?)", i, got)
		}
		resp.Header.Set("Retry-After", "999") // the next response must not see this
		if body := readAll(t, resp); body != "busy" {
			t.Errorf("body %q", body)
		}
	}
	if step.Header.Get("Retry-After") != "3" {
		t.Error("a response's header is the step's own map")
	}
}

func TestZeroStepAnswers200WithABodyToClose(t *testing.T) {
	rt := transporttest.New(transporttest.Steps())
	resp, err := rt.RoundTrip(newRequest(t, context.Background(), http.MethodHead, "http://a.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Body == nil || resp.Body == http.NoBody {
		t.Fatalf("status %d body %T, want 200 with a body of the kit's", resp.StatusCode, resp.Body)
	}
	if n := rt.Unclosed(); n != 1 {
		t.Errorf("Unclosed %d before Close, want 1", n)
	}
	resp.Body.Close()
	resp.Body.Close() // a second Close counts once
	if n := rt.Unclosed(); n != 0 {
		t.Errorf("Unclosed %d after Close, want 0", n)
	}
	if _, err := resp.Body.Read(make([]byte, 1)); err == nil || err == io.EOF {
		t.Errorf("read after Close: %v, want an error", err)
	}
}

func TestStatusOutOfRangeFails(t *testing.T) {
	rt := transporttest.New(transporttest.Steps(transporttest.Status(42)))
	resp, err := rt.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://a.test/", nil))
	if err == nil || resp != nil {
		t.Fatalf("got %v, %v; want an error and no response", resp, err)
	}
	if !strings.HasPrefix(err.Error(), "transporttest: ") {
		t.Errorf("error %q lacks the package prefix", err)
	}
}

// The request body is read to its end and closed on every path, as the
// RoundTripper contract asks.
func TestRequestBodyIsReadAndClosedOnEveryPath(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		rt      *transporttest.RoundTripper
		ctx     context.Context
		body    io.Reader
		nilURL  bool
		wantErr bool
	}{
		{"answered", transporttest.New(transporttest.Steps()), context.Background(), strings.NewReader("abc"), false, false},
		{"step error", transporttest.New(transporttest.Steps(transporttest.ConnectionReset())), context.Background(), strings.NewReader("abc"), false, true},
		{"no script", transporttest.New(nil), context.Background(), strings.NewReader("abc"), false, true},
		{"context ended", transporttest.New(transporttest.Steps()), done, strings.NewReader("abc"), false, true},
		{"read error", transporttest.New(transporttest.Steps()), context.Background(), failingReader{}, false, true},
		{"nil URL", transporttest.New(transporttest.Steps()), context.Background(), strings.NewReader("abc"), true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &trackedBody{Reader: tt.body}
			req := newRequest(t, tt.ctx, http.MethodPut, "http://a.test/x", b)
			if tt.nilURL {
				req.URL = nil
			}
			resp, err := tt.rt.RoundTrip(req)
			if (err != nil) != tt.wantErr || (resp == nil) == (err == nil) {
				t.Fatalf("got %v, %v; want error %v and exactly one of response and error", resp, err, tt.wantErr)
			}
			if resp != nil {
				resp.Body.Close()
			}
			if n := b.closes(); n != 1 {
				t.Errorf("request body closed %d times, want 1", n)
			}
			if rest, _ := io.ReadAll(tt.body); len(rest) != 0 {
				t.Errorf("%d bytes of the body left unread", len(rest))
			}
		})
	}
}

func TestRecordsEveryRequestAsItArrived(t *testing.T) {
	rt := transporttest.New(transporttest.Steps(transporttest.Status(503).WithHeader("X-Step", "a"), transporttest.ConnectionReset(), transporttest.Status(200)))
	for i, body := range []string{"one", "", "three"} {
		var b io.ReadCloser
		if body != "" {
			b = io.NopCloser(strings.NewReader(body))
		}
		req := newRequest(t, context.Background(), http.MethodPost, fmt.Sprintf("http://a.test/p%d?q=%d", i, i), b)
		req.Header.Set("X-N", fmt.Sprint(i))
		if resp, err := rt.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}
	got := rt.Requests()
	if len(got) != 3 || rt.Count() != 3 {
		t.Fatalf("%d records, Count %d; want 3", len(got), rt.Count())
	}
	for i, r := range got {
		if r.N != i+1 || r.Attempt != i+1 || r.Method != http.MethodPost || r.URL.String() != fmt.Sprintf("http://a.test/p%d?q=%d", i, i) ||
			r.Header.Get("X-N") != fmt.Sprint(i) || !r.Done || r.Pattern != "" || r.Key != "" {
			t.Errorf("record %d: %+v", i, r)
		}
	}
	if string(got[0].Body) != "one" || got[1].Body != nil || string(got[2].Body) != "three" {
		t.Errorf("bodies %q %q %q", got[0].Body, got[1].Body, got[2].Body)
	}
	if got[0].Err != nil || !errors.Is(got[1].Err, syscall.ECONNRESET) || got[2].Err != nil {
		t.Errorf("errors %v %v %v; want nil, a reset, nil", got[0].Err, got[1].Err, got[2].Err)
	}
	if got[0].Step.Status != 503 || got[2].Step.Status != 200 {
		t.Errorf("steps %+v %+v", got[0].Step, got[2].Step)
	}
	// The records are the caller's, the step's header included.
	got[0].Step.Header.Set("X-Step", "changed")
	got[0].Header.Set("X-N", "changed")
	got[0].Body[0] = 'X'
	got[0].URL.Path = "/changed"
	again := rt.Requests()[0]
	if again.Header.Get("X-N") != "0" || string(again.Body) != "one" || again.URL.Path != "/p0" || again.Step.Header.Get("X-Step") != "a" {
		t.Errorf("changing a returned record changed the RoundTripper's: %+v", again)
	}
}

// A request whose context ended before it arrived is never sent, as with
// http.Transport: it is recorded but takes no step.
func TestEndedContextTakesNoStep(t *testing.T) {
	rt := transporttest.New(transporttest.Steps(transporttest.Status(503), transporttest.Status(200)))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := rt.RoundTrip(newRequest(t, ctx, http.MethodGet, "http://a.test/", nil)); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	resp, err := rt.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://a.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Errorf("the next request got %d, want the first step's 503", resp.StatusCode)
	}
	r := rt.Requests()
	if r[0].Attempt != 0 || !errors.Is(r[0].Err, context.Canceled) || r[1].Attempt != 1 {
		t.Errorf("records %+v", r)
	}
}

func TestLatencyWaitsOnTheClock(t *testing.T) {
	fake := clock.NewFake(testwait.Epoch)
	rt := transporttest.New(transporttest.Steps(transporttest.Status(200).After(time.Second)), transporttest.WithClock(fake))
	ch := roundTrip(rt, newRequest(t, context.Background(), http.MethodGet, "http://a.test/", nil))
	if !fake.WaitForTimers(1, testwait.Limit) {
		t.Fatal("the latency armed no timer")
	}
	fake.Advance(time.Second - time.Nanosecond)
	testwait.None(t, ch, "answer before the latency passed")
	fake.Advance(time.Nanosecond)
	r := testwait.Recv(t, ch, "the answer")
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.resp.Body.Close()
}

func TestLatencyEndsWithTheContext(t *testing.T) {
	tests := []struct {
		name string
		step transporttest.Step
	}{
		{"latency", transporttest.Status(200).After(time.Hour)},
		{"hang", transporttest.Hang()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := clock.NewFake(testwait.Epoch)
			rt := transporttest.New(transporttest.Steps(tt.step), transporttest.WithClock(fake))
			ctx, cancel := context.WithCancel(context.Background())
			ch := roundTrip(rt, newRequest(t, ctx, http.MethodGet, "http://a.test/", nil))
			timers := 0 // a latency arms one; a hang waits on the context alone
			if tt.step.Latency > 0 {
				timers = 1
			}
			// Wait until the step runs: chosen, and its timer armed.
			waitFor(t, func() bool {
				return rt.Count() == 1 && stepEqual(rt.Requests()[0].Step, tt.step) && fake.Pending() == timers
			})
			cancel()
			r := testwait.Recv(t, ch, "the cancelled request")
			if !errors.Is(r.err, context.Canceled) || r.resp != nil {
				t.Fatalf("got %v, %v; want context.Canceled", r.resp, r.err)
			}
			if n := fake.Pending(); n != 0 {
				t.Errorf("%d timers left pending after the cancellation", n)
			}
		})
	}
}

// stepEqual compares steps (Step holds a header map, so == does not).
func stepEqual(a, b transporttest.Step) bool {
	return a.Status == b.Status && a.Body == b.Body && a.Err == b.Err && a.Latency == b.Latency &&
		a.Hang == b.Hang && fmt.Sprint(a.Header) == fmt.Sprint(b.Header)
}

// waitFor polls cond until it holds, or fails the test after a while: a
// safety net, the condition is expected to hold at once or nearly.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testwait.Limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition never held")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestHandleRoutesByPattern(t *testing.T) {
	rt := transporttest.New(transporttest.Steps(transporttest.Status(404)))
	rt.Handle("GET /items/{id}", transporttest.Steps(transporttest.Status(201)))
	rt.Handle("POST /items/", transporttest.Steps(transporttest.Status(202)))
	rt.Handle("other.test/", transporttest.Steps(transporttest.Status(203)))
	rt.Handle("GET /{$}", transporttest.Steps(transporttest.Status(204)))
	tests := []struct {
		method, url string
		want        int
		pattern     string
	}{
		{"GET", "http://a.test/items/7", 201, "GET /items/{id}"},
		{"HEAD", "http://a.test/items/7", 201, "GET /items/{id}"}, // GET patterns match HEAD, as in ServeMux
		{"", "http://a.test/items/7", 201, "GET /items/{id}"},     // "" is GET
		{"POST", "http://a.test/items/7/parts", 202, "POST /items/"},
		{"PUT", "http://a.test/items/7", 404, ""},
		{"GET", "http://other.test/items/7", 203, "other.test/"},
		{"GET", "http://other.test:8080/x", 203, "other.test/"}, // the port is ignored, as in ServeMux
		{"GET", "http://a.test", 204, "GET /{$}"},               // no path matches as "/"
		{"GET", "http://a.test/a/../items/7", 404, ""},          // ServeMux would redirect: none
		{"GET", "http://a.test/items", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.url, func(t *testing.T) {
			req := newRequest(t, context.Background(), tt.method, tt.url, nil)
			req.Method = tt.method
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			recs := rt.Requests()
			if resp.StatusCode != tt.want || recs[len(recs)-1].Pattern != tt.pattern {
				t.Errorf("status %d pattern %q, want %d %q", resp.StatusCode, recs[len(recs)-1].Pattern, tt.want, tt.pattern)
			}
		})
	}
}

func TestHandlePanicsOnNonsense(t *testing.T) {
	tests := []struct {
		name string
		f    func(rt *transporttest.RoundTripper)
	}{
		{"nil script", func(rt *transporttest.RoundTripper) { rt.Handle("/", nil) }},
		{"invalid pattern", func(rt *transporttest.RoundTripper) { rt.Handle("GET", transporttest.Steps()) }},
		{"conflict", func(rt *transporttest.RoundTripper) {
			rt.Handle("GET /a/{x}", transporttest.Steps())
			rt.Handle("GET /a/{y}", transporttest.Steps())
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			tt.f(transporttest.New(nil))
		})
	}
}

func TestEachPatternAndKeyHasItsOwnCount(t *testing.T) {
	seq := transporttest.Steps(transporttest.Status(500), transporttest.Status(501), transporttest.Status(502))
	rt := transporttest.New(seq, transporttest.WithKey(func(r *http.Request) string { return r.Header.Get("X-Id") }))
	rt.Handle("/routed", seq)
	send := func(path, id string) int {
		req := newRequest(t, context.Background(), http.MethodGet, "http://a.test"+path, nil)
		req.Header.Set("X-Id", id)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	got := []int{send("/", "a"), send("/", "a"), send("/", "b"), send("/routed", "a"), send("/", "a"), send("/routed", "a"), send("/", "b")}
	want := []int{500, 501, 500, 500, 502, 501, 501}
	if !slices.Equal(got, want) {
		t.Errorf("statuses %v, want %v", got, want)
	}
	var attempts []int
	for _, r := range rt.Requests() {
		attempts = append(attempts, r.Attempt)
	}
	if !slices.Equal(attempts, []int{1, 2, 1, 1, 3, 2, 2}) {
		t.Errorf("attempt numbers %v", attempts)
	}
}

// A Func sees the attempt's number and the request, its body readable
// although the RoundTripper has read it.
func TestFuncSeesNumberAndReplayableBody(t *testing.T) {
	type seen struct {
		n    int
		body string
	}
	var mu sync.Mutex
	var got []seen
	rt := transporttest.New(transporttest.Func(func(n int, req *http.Request) transporttest.Step {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			t.Error(err)
		}
		mu.Lock()
		got = append(got, seen{n, string(b)})
		mu.Unlock()
		return transporttest.Status(200).WithBody(string(b))
	}))
	for _, body := range []string{"first", "second"} {
		req := newRequest(t, context.Background(), http.MethodPost, "http://a.test/", io.NopCloser(strings.NewReader(body)))
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if echo := readAll(t, resp); echo != body {
			t.Errorf("echo %q, want %q", echo, body)
		}
	}
	if !slices.Equal(got, []seen{{1, "first"}, {2, "second"}}) {
		t.Errorf("the script saw %v", got)
	}
}

// Many requests at once, on several keys: every one is recorded once, and
// each key's attempts are numbered 1..n without a gap or a repeat.
func TestConcurrentRequestsAreNumberedOncePerKey(t *testing.T) {
	const keys, perKey = 8, 50
	rt := transporttest.New(transporttest.Steps(transporttest.Status(503), transporttest.Status(200)),
		transporttest.WithKey(func(r *http.Request) string { return r.URL.Path }))
	var wg sync.WaitGroup
	for k := range keys {
		for range perKey {
			wg.Go(func() {
				req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://a.test/%d", k), nil)
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
			})
		}
	}
	wg.Wait()
	recs := rt.Requests()
	if len(recs) != keys*perKey || rt.Unclosed() != 0 {
		t.Fatalf("%d records, %d unclosed", len(recs), rt.Unclosed())
	}
	byKey := map[string][]int{}
	for i, r := range recs {
		if r.N != i+1 {
			t.Errorf("record %d has N %d", i, r.N)
		}
		byKey[r.Key] = append(byKey[r.Key], r.Attempt)
	}
	for k, ns := range byKey {
		slices.Sort(ns)
		for i, n := range ns {
			if n != i+1 {
				t.Errorf("key %s: attempt numbers %v, want 1..%d", k, ns, perKey)
				break
			}
		}
	}
}

// Handle may be called while requests are in flight (run with -race).
func TestHandleWhileRequestsAreInFlight(t *testing.T) {
	rt := transporttest.New(transporttest.Steps())
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() { rt.Handle(fmt.Sprintf("/r%d", i), transporttest.Steps(transporttest.Status(201))) })
		wg.Go(func() {
			resp, err := rt.RoundTrip(&http.Request{Method: "GET", URL: &url.URL{Scheme: "http", Host: "a.test", Path: fmt.Sprintf("/r%d", i)}})
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
}
