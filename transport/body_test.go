package transport_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

const payload = `{"item":"book","qty":3}`

func TestEveryAttemptSendsTheCallersBody(t *testing.T) {
	tests := []struct {
		name string
		opts []transport.Option
		body func() io.Reader
		want string
	}{
		{"strings.Reader", nil, func() io.Reader { return strings.NewReader(payload) }, payload},
		{"bytes.Buffer", nil, func() io.Reader { return bytes.NewBufferString(payload) }, payload},
		{"bytes.Reader", nil, func() io.Reader { return bytes.NewReader([]byte(payload)) }, payload},
		{"custom reader, buffered", nil, func() io.Reader { return newCallerBody(strings.NewReader(payload)) }, payload},
		{"custom reader exactly at the limit", []transport.Option{transport.WithMaxBufferedBody(int64(len(payload)))},
			func() io.Reader { return newCallerBody(strings.NewReader(payload)) }, payload},
		{"custom reader in small reads", nil, func() io.Reader { return iotest.OneByteReader(strings.NewReader(payload)) }, payload},
		{"http.NoBody", nil, func() io.Reader { return http.NoBody }, ""},
		{"nil body", nil, func() io.Reader { return nil }, ""},
		{"empty strings.Reader", nil, func() io.Reader { return strings.NewReader("") }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newScript(t, reply(503), reply(503), reply(200))
			tr := transport.New(newBase(t), append([]transport.Option{noDelay}, tc.opts...)...)
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodPut, s.URL, tc.body()))
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			want := []string{tc.want, tc.want, tc.want}
			if got := s.received(); !reflect.DeepEqual(got, want) {
				t.Errorf("server received %q, want %q", got, want)
			}
		})
	}
}

func TestBodyOverBufferLimitIsSentOnceExactly(t *testing.T) {
	big := strings.Repeat("0123456789", 100)
	tests := []struct {
		name  string
		limit int64
		body  string
	}{
		{"larger than the limit", 16, big},
		{"one byte over the limit", int64(len(payload)) - 1, payload},
		{"limit 0 never buffers", 0, "x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newScript(t, reply(503))
			var end events[resilience.CallEndEvent]
			tr := transport.New(newBase(t), noDelay, transport.WithMaxBufferedBody(tc.limit),
				transport.WithHooks(transport.Hooks{OnCallEnd: end.add}))
			body := newCallerBody(strings.NewReader(tc.body))
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodPut, s.URL, body))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 503 {
				t.Errorf("status %d, want the 503", resp.StatusCode)
			}
			readBody(t, resp)
			if got := s.received(); !reflect.DeepEqual(got, []string{tc.body}) {
				t.Errorf("server received %d requests (%d bytes first), want exactly one with the whole body", len(got), len(got[0]))
			}
			if got := end.get(); len(got) != 1 || got[0].Reason != resilience.ReasonBodyNotReplayable {
				t.Errorf("OnCallEnd %+v, want one event with reason body_not_replayable", got)
			}
			if body.closes.Load() == 0 {
				t.Errorf("caller's body not closed")
			}
		})
	}
}

// TestSingleAttemptBodiesStreamUnread pins that a request that gets one
// attempt has its body handed to the base transport unread: the server sees
// the request before the caller has written a byte of the body.
func TestSingleAttemptBodiesStreamUnread(t *testing.T) {
	tests := []struct {
		name          string
		method        string
		contentLength int64
		opts          []transport.Option
		policy        *transport.Policy
	}{
		{"ContentLength over the buffer limit", http.MethodPut, int64(len(payload)),
			[]transport.Option{transport.WithMaxBufferedBody(8)}, nil},
		{"NoRetry policy", http.MethodPut, -1, nil, &transport.Policy{MaxAttempts: 1, MaxHedges: -1}},
		{"MaxAttempts 1", http.MethodPut, -1, []transport.Option{transport.WithMaxAttempts(1)}, nil},
		{"POST is not idempotent", http.MethodPost, -1, nil, nil},
		{"PATCH is not idempotent", http.MethodPatch, int64(len(payload)), nil, nil},
		{"POST with hedging on", http.MethodPost, -1,
			[]transport.Option{transport.WithHedging(time.Hour, 2)}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			started := make(chan struct{}, 4)
			bodies := make(chan string, 4)
			var hits atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				started <- struct{}{}
				b, _ := io.ReadAll(r.Body)
				bodies <- string(b)
				w.WriteHeader(503)
			}))
			t.Cleanup(srv.Close)

			pr, pw := io.Pipe()
			t.Cleanup(func() { pw.CloseWithError(errors.New("test over")) })
			ctx := testCtx(t)
			if tc.policy != nil {
				ctx = transport.WithPolicy(ctx, *tc.policy)
			}
			req := newRequest(t, ctx, tc.method, srv.URL, pr)
			req.ContentLength = tc.contentLength
			tr := transport.New(newBase(t), append([]transport.Option{noDelay}, tc.opts...)...)
			done := goRoundTrip(tr, req)

			recv(t, started, "the request to reach the server before its body is written")
			io.WriteString(pw, payload)
			pw.Close()
			if got := recv(t, bodies, "the body"); got != payload {
				t.Errorf("server received %q, want %q", got, payload)
			}
			r := recv(t, done, "RoundTrip")
			if r.err != nil {
				t.Fatal(r.err)
			}
			readBody(t, r.resp)
			if r.resp.StatusCode != 503 {
				t.Errorf("status %d, want 503", r.resp.StatusCode)
			}
			if got := hits.Load(); got != 1 {
				t.Errorf("server saw %d attempts, want 1", got)
			}
		})
	}
}

func TestCallerBodyIsClosedOnEveryPath(t *testing.T) {
	refused := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		return "http://" + ln.Addr().String() + "/"
	}
	served := func(steps ...http.HandlerFunc) func(t *testing.T) string {
		return func(t *testing.T) string { return newScript(t, steps...).URL }
	}
	cancelled := func() context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}
	openBreaker := func(t *testing.T, tr *transport.Transport, url string) {
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, url, nil))
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, resp)
	}
	nothing := func(*testing.T, *transport.Transport, string) {}
	rewind := func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(payload)), nil }
	tests := []struct {
		name    string
		method  string
		url     func(t *testing.T) string
		opts    []transport.Option
		ctx     func() context.Context
		setup   func(t *testing.T, tr *transport.Transport, url string)
		getBody func() (io.ReadCloser, error)
	}{
		{"success", http.MethodPut, served(reply(200)), nil, context.Background, nothing, nil},
		{"retried, then success", http.MethodPut, served(reply(503), reply(200)), nil, context.Background, nothing, nil},
		{"retried via GetBody", http.MethodPut, served(reply(503), reply(200)), nil, context.Background, nothing, rewind},
		{"exhausted retries", http.MethodPut, served(reply(503)), nil, context.Background, nothing, nil},
		{"connection refused, retried", http.MethodPut, refused, nil, context.Background, nothing, nil},
		{"connection refused, single attempt", http.MethodPost, refused, nil, context.Background, nothing, nil},
		{"POST passed through", http.MethodPost, served(reply(200)), nil, context.Background, nothing, nil},
		{"over the buffer limit", http.MethodPut, served(reply(503)),
			[]transport.Option{transport.WithMaxBufferedBody(2)}, context.Background, nothing, nil},
		{"invalid policy", http.MethodPut, served(reply(200)), nil,
			func() context.Context {
				return transport.WithPolicy(context.Background(), transport.Policy{MaxAttempts: -1})
			},
			nothing, nil},
		{"breaker rejection", http.MethodPut, served(reply(503)),
			[]transport.Option{transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 1, OpenDuration: time.Hour})},
			context.Background, openBreaker, nil},
		{"context already cancelled", http.MethodPut, served(reply(200)), nil, cancelled, nothing, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			url := tc.url(t)
			tr := transport.New(newBase(t), append([]transport.Option{noDelay}, tc.opts...)...)
			tc.setup(t, tr, url)
			body := newCallerBody(strings.NewReader(payload))
			req := newRequest(t, tc.ctx(), tc.method, url, body)
			req.GetBody = tc.getBody
			resp, err := tr.RoundTrip(req)
			closeResp(result{resp, err})
			if body.closes.Load() == 0 {
				t.Errorf("caller's body not closed (err %v)", err)
			}
		})
	}
}

func TestBodyReadErrorWhileBufferingFailsBeforeAnyAttempt(t *testing.T) {
	errBoom := errors.New("disk on fire")
	s := newScript(t, reply(200))
	tr := transport.New(newBase(t), noDelay)
	body := newCallerBody(io.MultiReader(strings.NewReader("part"), iotest.ErrReader(errBoom)))
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodPut, s.URL, body))
	closeResp(result{resp, err})
	if !errors.Is(err, errBoom) {
		t.Errorf("err = %v, want the body's read error", err)
	}
	if got := s.count(); got != 0 {
		t.Errorf("server saw %d attempts, want 0", got)
	}
	if body.closes.Load() == 0 {
		t.Errorf("caller's body not closed")
	}
}

func TestGetBodyFailingMidwayStopsWithItsError(t *testing.T) {
	errGetBody := errors.New("cannot rewind")
	s := newScript(t, reply(503))
	tr := transport.New(newBase(t), noDelay, transport.WithMaxAttempts(5))
	req := newRequest(t, context.Background(), http.MethodPut, s.URL, strings.NewReader(payload))
	var calls atomic.Int32
	req.GetBody = func() (io.ReadCloser, error) {
		if calls.Add(1) > 1 {
			return nil, errGetBody
		}
		return io.NopCloser(strings.NewReader(payload)), nil
	}
	resp, err := tr.RoundTrip(req)
	closeResp(result{resp, err})
	if !errors.Is(err, errGetBody) {
		t.Errorf("err = %v, want the GetBody error", err)
	}
	if got := s.received(); !reflect.DeepEqual(got, []string{payload, payload}) {
		t.Errorf("server received %q, want the body twice and nothing after GetBody failed", got)
	}
}

func TestCallerRequestIsNeverModified(t *testing.T) {
	type key struct{}
	tests := []struct {
		name string
		body func() io.Reader
	}{
		{"buffered custom body", func() io.Reader { return newCallerBody(strings.NewReader(payload)) }},
		{"GetBody body", func() io.Reader { return strings.NewReader(payload) }},
		{"no body", func() io.Reader { return nil }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newScript(t, reply(503), reply(503), reply(200))
			log := &attemptLog{base: newBase(t)}
			tr := transport.New(log, noDelay, transport.WithHooks(transport.Hooks{
				OnAttemptStart: func(ctx context.Context, e resilience.AttemptStartEvent) context.Context {
					transport.HeaderOf(e).Set("X-Attempt", "set by hook")
					transport.HeaderOf(e).Del("X-Caller")
					return context.WithValue(ctx, key{}, e.Attempt)
				},
			}))
			ctx := context.WithValue(context.Background(), key{}, "caller")
			req := newRequest(t, ctx, http.MethodPut, s.URL+"/path?q=1", tc.body())
			req.Header.Set("X-Caller", "yes")
			before := struct {
				url, method, host string
				header            http.Header
				body              io.ReadCloser
				getBody           uintptr
				contentLength     int64
			}{req.URL.String(), req.Method, req.Host, req.Header.Clone(), req.Body,
				reflect.ValueOf(req.GetBody).Pointer(), req.ContentLength}
			urlPtr := req.URL

			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)

			if req.URL != urlPtr || req.URL.String() != before.url || req.Method != before.method || req.Host != before.host {
				t.Errorf("URL, method or host changed: %s %s %s", req.Method, req.URL, req.Host)
			}
			if !reflect.DeepEqual(req.Header, before.header) {
				t.Errorf("header changed: %v, was %v", req.Header, before.header)
			}
			if req.Body != before.body {
				t.Errorf("Body replaced")
			}
			if reflect.ValueOf(req.GetBody).Pointer() != before.getBody {
				t.Errorf("GetBody replaced")
			}
			if req.ContentLength != before.contentLength {
				t.Errorf("ContentLength %d, was %d", req.ContentLength, before.contentLength)
			}
			if req.Context() != ctx {
				t.Errorf("context replaced")
			}
			attempts := log.requests()
			if len(attempts) != 3 {
				t.Fatalf("%d attempts, want 3", len(attempts))
			}
			for i, a := range attempts {
				if a == req {
					t.Errorf("attempt %d sent the caller's *http.Request", i+1)
				}
				if a.Context().Value(key{}) != i+1 {
					t.Errorf("attempt %d context value %v, want its own context", i+1, a.Context().Value(key{}))
				}
			}
			for i, h := range s.receivedHeaders() {
				if h.Get("X-Attempt") != "set by hook" || h.Get("X-Caller") != "" {
					t.Errorf("attempt %d headers %v, want the hook's changes", i+1, h)
				}
			}
		})
	}
}
