package transport_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

type ctxKey string

// sequence is a base transport answering its nth attempt with steps[n-1].
func sequence(steps ...func(r *http.Request) (*http.Response, error)) (http.RoundTripper, *atomic.Int32) {
	var n atomic.Int32
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		return steps[min(int(n.Add(1)), len(steps))-1](r)
	}), &n
}

func status(code int, kv ...string) func(*http.Request) (*http.Response, error) {
	return func(r *http.Request) (*http.Response, error) { return fakeResponse(r, code, "x", kv...), nil }
}

func failWith(err error) func(*http.Request) (*http.Response, error) {
	return func(*http.Request) (*http.Response, error) { return nil, err }
}

var dnsNotFound = &net.DNSError{Err: "no such host", Name: "svc.test", IsNotFound: true}

func TestOnRetryAndOnBackoffPayloads(t *testing.T) {
	fc := newClock()
	base, _ := sequence(status(503, "Retry-After", "2"), failWith(errReset), status(200))
	var retries events[resilience.RetryEvent]
	var sleeps events[resilience.BackoffEvent]
	var tokens events[float64]
	var tr *transport.Transport
	tr = transport.New(base, transport.WithClock(fc), transport.WithBackoff(resilience.Constant(3*time.Second)),
		transport.WithHooks(transport.Hooks{
			OnRetry: func(e resilience.RetryEvent) {
				retries.add(e)
				tokens.add(tr.Stats().BudgetTokens) // hooks may read the budget
			},
			OnBackoff: sleeps.add,
		}))
	req := newRequest(t, testCtx(t), http.MethodGet, "http://svc.test/", nil)
	done := goRoundTrip(tr, req)
	waitArmed(t, fc, 1)
	fc.Advance(2 * time.Second)
	waitArmed(t, fc, 2)
	fc.Advance(3 * time.Second)
	r := recv(t, done, "RoundTrip")
	if r.err != nil {
		t.Fatal(r.err)
	}
	readBody(t, r.resp)

	got := retries.get()
	if len(got) != 2 {
		t.Fatalf("OnRetry fired %d times, want 2", len(got))
	}
	ev := resilience.Event{Key: req.URL.Host, Subject: req}
	want := []resilience.RetryEvent{
		{Event: ev, Attempt: 1, Delay: 2 * time.Second, Code: 503, FromRetryAfter: true},
		{Event: ev, Attempt: 2, Delay: 3 * time.Second, Err: errReset},
	}
	for i := range want {
		got[i].Context = nil
		if got[i] != want[i] {
			t.Errorf("OnRetry %d = %+v, want %+v", i+1, got[i], want[i])
		}
	}
	sl := sleeps.get()
	wantSleeps := []resilience.BackoffEvent{
		{Event: ev, Retry: 1, Start: fakeStart, Delay: 2 * time.Second, Slept: 2 * time.Second, FromRetryAfter: true},
		{Event: ev, Retry: 2, Start: fakeStart.Add(2 * time.Second), Delay: 3 * time.Second, Slept: 3 * time.Second},
	}
	if len(sl) != 2 {
		t.Fatalf("OnBackoff fired %d times, want 2", len(sl))
	}
	for i := range wantSleeps {
		sl[i].Context = nil
		if sl[i] != wantSleeps[i] {
			t.Errorf("OnBackoff %d = %+v, want %+v", i+1, sl[i], wantSleeps[i])
		}
	}
	if tk := tokens.get(); len(tk) != 2 {
		t.Errorf("BudgetTokens from a hook: %v", tk)
	}
}

func TestOnBackoffReportsAnInterruptedSleep(t *testing.T) {
	fc := newClock()
	base, _ := sequence(status(503))
	sleeps := make(chan resilience.BackoffEvent, 1)
	tr := transport.New(base, transport.WithClock(fc), transport.WithBackoff(resilience.Constant(time.Minute)),
		transport.WithHooks(transport.Hooks{OnBackoff: func(e resilience.BackoffEvent) { sleeps <- e }}))
	ctx, cancel := context.WithCancel(context.Background())
	done := goRoundTrip(tr, newRequest(t, ctx, http.MethodGet, "http://svc.test/", nil))
	waitArmed(t, fc, 1)
	fc.Advance(10 * time.Second)
	cancel()
	if r := recv(t, done, "RoundTrip"); r.err != context.Canceled {
		t.Errorf("err = %v, want context.Canceled", r.err)
	}
	e := recv(t, sleeps, "OnBackoff")
	if !e.Interrupted || e.Delay != time.Minute || e.Slept != 10*time.Second {
		t.Errorf("OnBackoff %+v, want Interrupted after 10s of a 1m sleep", e)
	}
}

func TestOnCallStartContextIsTheParentOfEveryAttempt(t *testing.T) {
	fc := newClock()
	gone := make(chan int, 1)
	s := newScript(t, reply(503), hang(gone), reply(200))
	log := &attemptLog{base: newBase(t)}
	var seen events[string]
	record := func(where string, ctx context.Context) {
		seen.add(fmt.Sprintf("%s:%v", where, ctx.Value(ctxKey("span"))))
	}
	tr := transport.New(log, noDelay, transport.WithClock(fc), transport.WithHedging(hedgeDelay, 1),
		transport.WithHooks(transport.Hooks{
			OnCallStart: func(ctx context.Context, e resilience.CallStartEvent) context.Context {
				return context.WithValue(ctx, ctxKey("span"), "request")
			},
			OnAttemptStart: func(ctx context.Context, e resilience.AttemptStartEvent) context.Context {
				record("attempt", ctx)
				return ctx
			},
			OnRetry:   func(e resilience.RetryEvent) { record("retry", e.Context) },
			OnHedge:   func(e resilience.HedgeEvent) { record("hedge", e.Context) },
			OnCallEnd: func(e resilience.CallEndEvent) { record("end", e.Context) },
		}))
	done := goRoundTrip(tr, newRequest(t, testCtx(t), http.MethodGet, s.URL, nil))
	recv(t, s.arrived, "attempt 1")
	recv(t, s.arrived, "the retry")
	waitArmed(t, fc, 2)
	fc.Advance(hedgeDelay)
	recv(t, s.arrived, "the hedge")
	r := recv(t, done, "RoundTrip")
	if r.err != nil {
		t.Fatal(r.err)
	}
	readBody(t, r.resp)
	recv(t, gone, "the loser to be cancelled")
	for i, a := range log.requests() {
		if v := a.Context().Value(ctxKey("span")); v != "request" {
			t.Errorf("attempt %d context carries %v, want the OnCallStart context's value", i+1, v)
		}
	}
	for _, s := range seen.get() {
		if !strings.HasSuffix(s, ":request") {
			t.Errorf("hook saw %s, want the OnCallStart context", s)
		}
	}
	if got := len(seen.get()); got != 6 { // 3 attempts, a retry, a hedge, the end
		t.Errorf("%d hook calls, want 6: %v", got, seen.get())
	}
}

func TestOnAttemptStart(t *testing.T) {
	fc := newClock()
	gone := make(chan int, 1)
	s := newScript(t, reply(503), hang(gone), reply(200))
	var starts events[resilience.AttemptStartEvent]
	tr := transport.New(newBase(t), noDelay, transport.WithClock(fc), transport.WithHedging(hedgeDelay, 1),
		transport.WithHooks(transport.Hooks{
			OnAttemptStart: func(ctx context.Context, e resilience.AttemptStartEvent) context.Context {
				starts.add(e)
				transport.HeaderOf(e).Set("X-Attempt", fmt.Sprintf("%d-%s", e.Attempt, e.Kind))
				transport.HeaderOf(e).Add("X-Caller", "added by hook")
				return ctx
			},
		}))
	req := newRequest(t, testCtx(t), http.MethodGet, s.URL, nil)
	req.Header.Set("X-Caller", "original")
	done := goRoundTrip(tr, req)
	recv(t, s.arrived, "attempt 1")
	recv(t, s.arrived, "the retry")
	waitArmed(t, fc, 2)
	fc.Advance(hedgeDelay)
	recv(t, s.arrived, "the hedge")
	r := recv(t, done, "RoundTrip")
	if r.err != nil {
		t.Fatal(r.err)
	}
	readBody(t, r.resp)
	recv(t, gone, "the loser to be cancelled")

	wantHeaders := []string{"1-initial", "2-retry", "3-hedge"}
	for i, h := range s.receivedHeaders() {
		if h.Get("X-Attempt") != wantHeaders[i] || strings.Join(h.Values("X-Caller"), ",") != "original,added by hook" {
			t.Errorf("attempt %d sent X-Attempt %q, X-Caller %q", i+1, h.Get("X-Attempt"), h.Values("X-Caller"))
		}
	}
	if got := req.Header; len(got) != 1 || strings.Join(got.Values("X-Caller"), ",") != "original" {
		t.Errorf("caller's headers changed: %v", got)
	}
	st := starts.get()
	wantKinds := []resilience.AttemptKind{resilience.KindInitial, resilience.KindRetry, resilience.KindHedge}
	if len(st) != 3 {
		t.Fatalf("OnAttemptStart fired %d times, want 3", len(st))
	}
	for i, e := range st {
		if e.Attempt != i+1 || e.Kind != wantKinds[i] || e.Probe || transport.RequestOf(e.Event) != req {
			t.Errorf("OnAttemptStart %d = %+v", i+1, e)
		}
	}
}

func TestOnAttemptEndOutcomes(t *testing.T) {
	cancelling := func(cancel *context.CancelFunc) func(*http.Request) (*http.Response, error) {
		return func(r *http.Request) (*http.Response, error) {
			(*cancel)()
			return nil, r.Context().Err()
		}
	}
	var cancel context.CancelFunc
	tests := []struct {
		name      string
		steps     []func(*http.Request) (*http.Response, error)
		outcomes  []resilience.AttemptOutcome
		codes     []int
		wantError []bool
	}{
		{"retryable, then success", []func(*http.Request) (*http.Response, error){status(503), status(200)},
			[]resilience.AttemptOutcome{resilience.AttemptRetryable, resilience.AttemptSuccess}, []int{503, 200}, []bool{false, false}},
		{"final 404 is a success", []func(*http.Request) (*http.Response, error){status(404)},
			[]resilience.AttemptOutcome{resilience.AttemptSuccess}, []int{404}, []bool{false}},
		{"non-retryable error", []func(*http.Request) (*http.Response, error){failWith(dnsNotFound)},
			[]resilience.AttemptOutcome{resilience.AttemptFailure}, []int{0}, []bool{true}},
		{"retryable error, then failure", []func(*http.Request) (*http.Response, error){failWith(errReset), failWith(dnsNotFound)},
			[]resilience.AttemptOutcome{resilience.AttemptRetryable, resilience.AttemptFailure}, []int{0, 0}, []bool{true, true}},
		{"exhausted", []func(*http.Request) (*http.Response, error){status(503)},
			[]resilience.AttemptOutcome{resilience.AttemptRetryable, resilience.AttemptRetryable, resilience.AttemptRetryable},
			[]int{503, 503, 503}, []bool{false, false, false}},
		{"caller cancelled", []func(*http.Request) (*http.Response, error){cancelling(&cancel)},
			[]resilience.AttemptOutcome{resilience.AttemptCancelled}, []int{0}, []bool{true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base, _ := sequence(tc.steps...)
			var ends events[resilience.AttemptEndEvent]
			tr := transport.New(base, noDelay, transport.WithHooks(transport.Hooks{OnAttemptEnd: ends.add}))
			var ctx context.Context
			ctx, cancel = context.WithCancel(context.Background())
			defer cancel()
			req := newRequest(t, ctx, http.MethodGet, "http://svc.test/", nil)
			resp, err := tr.RoundTrip(req)
			closeResp(result{resp, err})
			got := ends.get()
			if len(got) != len(tc.outcomes) {
				t.Fatalf("OnAttemptEnd fired %d times, want %d", len(got), len(tc.outcomes))
			}
			for i, e := range got {
				if e.Outcome != tc.outcomes[i] || e.Code != tc.codes[i] || (e.Err != nil) != tc.wantError[i] ||
					e.Attempt != i+1 || transport.RequestOf(e.Event) != req || e.Context == nil {
					t.Errorf("OnAttemptEnd %d = %+v, want outcome %v, status %d", i+1, e, tc.outcomes[i], tc.codes[i])
				}
			}
		})
	}
}

func TestOutcomeAndReasonStrings(t *testing.T) {
	tests := []struct {
		got  fmt.Stringer
		want string
	}{
		{resilience.AttemptSuccess, "success"},
		{resilience.AttemptRetryable, "retryable"},
		{resilience.AttemptFailure, "failure"},
		{resilience.AttemptCancelled, "cancelled"},
		{resilience.KindInitial, "initial"},
		{resilience.KindRetry, "retry"},
		{resilience.KindHedge, "hedge"},
		{resilience.ReasonSuccess, "success"},
		{resilience.ReasonNotRetryable, "not_retryable"},
		{resilience.ReasonAttemptsExhausted, "attempts_exhausted"},
		{resilience.ReasonBudgetExhausted, "budget_exhausted"},
		{resilience.ReasonCircuitOpen, "circuit_open"},
		{resilience.ReasonRetryAfterTooLong, "retry_after_too_long"},
		{resilience.ReasonPastDeadline, "past_deadline"},
		{resilience.ReasonNotIdempotent, "not_idempotent"},
		{resilience.ReasonBodyNotReplayable, "body_not_replayable"},
		{resilience.ReasonCanceled, "canceled"},
		{resilience.ReasonOverloaded, "overloaded"},
		{resilience.ReasonPushback, "pushback"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			if s := tc.got.String(); s != tc.want {
				t.Errorf("String() = %q, want %q", s, tc.want)
			}
		})
	}
}

func TestOnCallEndReasons(t *testing.T) {
	openBreaker := func(t *testing.T, tr *transport.Transport) {
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://svc.test/", nil))
		closeResp(result{resp, err})
	}
	nothing := func(*testing.T, *transport.Transport) {}
	cancelled := func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx, cancel
	}
	background := func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }
	withDeadline := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), time.Hour)
	}
	tests := []struct {
		name         string
		steps        []func(*http.Request) (*http.Response, error)
		opts         []transport.Option
		method       string
		body         io.Reader
		ctx          func() (context.Context, context.CancelFunc)
		setup        func(*testing.T, *transport.Transport)
		wantReason   resilience.EndReason
		wantAttempts int
		wantStatus   int
	}{
		{"success", []func(*http.Request) (*http.Response, error){status(200)}, nil, http.MethodGet, nil, background, nothing,
			resilience.ReasonSuccess, 1, 200},
		{"final 404", []func(*http.Request) (*http.Response, error){status(404)}, nil, http.MethodGet, nil, background, nothing,
			resilience.ReasonSuccess, 1, 404},
		{"non-retryable error", []func(*http.Request) (*http.Response, error){failWith(dnsNotFound)}, nil, http.MethodGet, nil, background, nothing,
			resilience.ReasonNotRetryable, 1, 0},
		{"attempts exhausted", []func(*http.Request) (*http.Response, error){status(503)}, nil, http.MethodGet, nil, background, nothing,
			resilience.ReasonAttemptsExhausted, 3, 503},
		{"budget exhausted", []func(*http.Request) (*http.Response, error){status(503)},
			[]transport.Option{transport.WithRetryBudget(0, 1), transport.WithClock(newClock())}, http.MethodGet, nil, background, nothing,
			resilience.ReasonBudgetExhausted, 2, 503},
		{"circuit open at admission", []func(*http.Request) (*http.Response, error){status(503)},
			[]transport.Option{transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 1, OpenDuration: time.Hour}),
				transport.WithClock(newClock())}, http.MethodGet, nil, background, openBreaker,
			resilience.ReasonCircuitOpen, 0, 0},
		{"Retry-After too long", []func(*http.Request) (*http.Response, error){status(429, "Retry-After", "100")},
			[]transport.Option{transport.WithMaxRetryAfter(10 * time.Second)}, http.MethodGet, nil, background, nothing,
			resilience.ReasonRetryAfterTooLong, 1, 429},
		{"backoff past the deadline", []func(*http.Request) (*http.Response, error){status(503)},
			[]transport.Option{transport.WithBackoff(resilience.Constant(2 * time.Hour))}, http.MethodGet, nil, withDeadline, nothing,
			resilience.ReasonPastDeadline, 1, 503},
		{"not idempotent", []func(*http.Request) (*http.Response, error){status(503)}, nil, http.MethodPost, strings.NewReader("x"), background, nothing,
			resilience.ReasonNotIdempotent, 1, 503},
		{"body not replayable", []func(*http.Request) (*http.Response, error){status(503)},
			[]transport.Option{transport.WithMaxBufferedBody(1)}, http.MethodPut, iotest.OneByteReader(strings.NewReader("xyz")), background, nothing,
			resilience.ReasonBodyNotReplayable, 1, 503},
		{"cancelled", []func(*http.Request) (*http.Response, error){status(200)}, nil, http.MethodGet, nil, cancelled, nothing,
			resilience.ReasonCanceled, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base, _ := sequence(tc.steps...)
			var ends events[resilience.CallEndEvent]
			tr := transport.New(base, append([]transport.Option{noDelay,
				transport.WithHooks(transport.Hooks{OnCallEnd: ends.add})}, tc.opts...)...)
			tc.setup(t, tr)
			ctx, cancel := tc.ctx()
			defer cancel()
			req := newRequest(t, ctx, tc.method, "http://svc.test/", tc.body)
			resp, err := tr.RoundTrip(req)
			closeResp(result{resp, err})
			got := ends.get()
			if len(got) == 0 {
				t.Fatal("OnCallEnd did not fire")
			}
			e := got[len(got)-1]
			if e.Reason != tc.wantReason || e.Attempts != tc.wantAttempts || e.Code != tc.wantStatus ||
				e.Err != err || transport.RequestOf(e.Event) != req {
				t.Errorf("OnCallEnd = %+v (err %v), want reason %v, %d attempts, status %d", e, err, tc.wantReason, tc.wantAttempts, tc.wantStatus)
			}
		})
	}
}

func TestOnResultDoneFiresOnceOnCloseOrEOF(t *testing.T) {
	errBoom := errors.New("stream broke")
	readAll := func(b io.ReadCloser) { io.ReadAll(b) }
	closeIt := func(b io.ReadCloser) { b.Close() }
	tests := []struct {
		name    string
		body    func() io.Reader
		use     []func(io.ReadCloser)
		wantErr error
	}{
		{"closed unread", func() io.Reader { return strings.NewReader("hello") }, []func(io.ReadCloser){closeIt}, nil},
		{"read to EOF", func() io.Reader { return strings.NewReader("hello") }, []func(io.ReadCloser){readAll}, nil},
		{"read to EOF, then closed", func() io.Reader { return strings.NewReader("hello") }, []func(io.ReadCloser){readAll, closeIt}, nil},
		{"closed twice", func() io.Reader { return strings.NewReader("hello") }, []func(io.ReadCloser){closeIt, closeIt}, nil},
		{"read error", func() io.Reader { return io.MultiReader(strings.NewReader("he"), iotest.ErrReader(errBoom)) },
			[]func(io.ReadCloser){readAll, closeIt}, errBoom},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				resp := fakeResponse(r, 200, "")
				resp.Body = io.NopCloser(tc.body())
				return resp, nil
			})
			var closed events[resilience.ResultDoneEvent]
			tr := transport.New(base, transport.WithHooks(transport.Hooks{
				OnAttemptStart: func(ctx context.Context, e resilience.AttemptStartEvent) context.Context {
					return context.WithValue(ctx, ctxKey("attempt"), e.Attempt)
				},
				OnResultDone: closed.add,
			}))
			req := newRequest(t, context.Background(), http.MethodGet, "http://svc.test/", nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			if got := closed.get(); len(got) != 0 {
				t.Fatalf("OnResultDone fired before the body was used: %+v", got)
			}
			for _, use := range tc.use {
				use(resp.Body)
			}
			got := closed.get()
			if len(got) != 1 || transport.RequestOf(got[0].Event) != req || got[0].Attempt != 1 || got[0].Err != tc.wantErr ||
				got[0].Context.Value(ctxKey("attempt")) != 1 {
				t.Errorf("OnResultDone %+v, want exactly one event for attempt 1 with Err %v", got, tc.wantErr)
			}
			resp.Body.Close()
			if n := len(closed.get()); n != 1 {
				t.Errorf("OnResultDone fired %d times, want once", n)
			}
		})
	}
}

// TestCombine checks every field: the combined hook calls a's then b's,
// context-returning hooks are chained, and neither input changes.
func TestCombine(t *testing.T) {
	var calls []string
	ht := reflect.TypeOf(transport.Hooks{})
	mk := func(field, who string) reflect.Value {
		ft, _ := ht.FieldByName(field)
		return reflect.MakeFunc(ft.Type, func(args []reflect.Value) []reflect.Value {
			calls = append(calls, field+":"+who)
			outs := make([]reflect.Value, ft.Type.NumOut())
			for i := range outs {
				outs[i] = reflect.ValueOf(context.WithValue(context.Background(), ctxKey("by"), who))
			}
			return outs
		})
	}
	var a, b transport.Hooks
	av, bv := reflect.ValueOf(&a).Elem(), reflect.ValueOf(&b).Elem()
	for i := range ht.NumField() {
		name := ht.Field(i).Name
		av.Field(i).Set(mk(name, "a"))
		bv.Field(i).Set(mk(name, "b"))
	}
	c := resilience.Combine(a, b)
	cv := reflect.ValueOf(c)
	for i := range ht.NumField() {
		t.Run(ht.Field(i).Name, func(t *testing.T) {
			name := ht.Field(i).Name
			f := cv.Field(i)
			args := make([]reflect.Value, f.Type().NumIn())
			for j := range args {
				args[j] = reflect.Zero(f.Type().In(j))
			}
			calls = nil
			out := f.Call(args)
			if want := []string{name + ":a", name + ":b"}; !reflect.DeepEqual(calls, want) {
				t.Errorf("combined hook calls %v, want %v", calls, want)
			}
			calls = nil
			av.Field(i).Call(args)
			if want := []string{name + ":a"}; !reflect.DeepEqual(calls, want) {
				t.Errorf("a's hook after combining calls %v, want %v (input modified)", calls, want)
			}
			if len(out) == 1 && out[0].Interface().(context.Context).Value(ctxKey("by")) != "b" {
				t.Errorf("combined context hook returned a's context, want b's")
			}
		})
	}
}

func TestCombineChainsContextsAndKeepsNilsFree(t *testing.T) {
	var order []string
	a := transport.Hooks{
		OnCallStart: func(ctx context.Context, e resilience.CallStartEvent) context.Context {
			order = append(order, "a")
			return context.WithValue(ctx, ctxKey("a"), "from a")
		},
	}
	b := transport.Hooks{
		OnCallStart: func(ctx context.Context, e resilience.CallStartEvent) context.Context {
			order = append(order, fmt.Sprintf("b saw %v", ctx.Value(ctxKey("a"))))
			return context.WithValue(ctx, ctxKey("b"), "from b")
		},
		OnRetry: func(resilience.RetryEvent) { order = append(order, "b retry") },
	}
	c := resilience.Combine(a, b)
	ctx := c.OnCallStart(context.Background(), resilience.CallStartEvent{})
	if ctx.Value(ctxKey("a")) != "from a" || ctx.Value(ctxKey("b")) != "from b" {
		t.Errorf("combined OnCallStart context lost a value")
	}
	c.OnRetry(resilience.RetryEvent{})
	if want := []string{"a", "b saw from a", "b retry"}; !reflect.DeepEqual(order, want) {
		t.Errorf("calls %v, want %v", order, want)
	}
	if a.OnRetry != nil {
		t.Errorf("Combine set a field of its first argument")
	}
	if c.OnHedge != nil || c.OnResultDone != nil || c.OnBreakerStateChange != nil {
		t.Errorf("a hook neither input sets is not nil in the combination")
	}
	empty := resilience.Combine(transport.Hooks{}, transport.Hooks{})
	if !reflect.ValueOf(empty).IsZero() {
		t.Errorf("Combine of two empty sets is not empty: %+v", empty)
	}
}

func TestWithHooksTwiceRunsBothInOrder(t *testing.T) {
	var order events[string]
	base, _ := sequence(status(200))
	tr := transport.New(base,
		transport.WithHooks(transport.Hooks{OnCallEnd: func(resilience.CallEndEvent) { order.add("first") }}),
		transport.WithHooks(transport.Hooks{OnCallEnd: func(resilience.CallEndEvent) { order.add("second") }}),
	)
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://svc.test/", nil))
	closeResp(result{resp, err})
	if got, want := order.get(), []string{"first", "second"}; !reflect.DeepEqual(got, want) {
		t.Errorf("OnCallEnd calls %v, want %v", got, want)
	}
}

// WithHooksFor's func runs once, inside New, with the transport being
// built (its base already set), and its hooks run in option order beside
// WithHooks'.
func TestWithHooksForGetsItsTransport(t *testing.T) {
	var order events[string]
	base, _ := sequence(status(200))
	var seen []*transport.Transport
	var unwrapped http.RoundTripper
	tr := transport.New(base,
		transport.WithHooks(transport.Hooks{OnCallEnd: func(resilience.CallEndEvent) { order.add("first") }}),
		transport.WithHooksFor(func(t *transport.Transport) transport.Hooks {
			seen = append(seen, t)
			unwrapped = t.Unwrap()
			return transport.Hooks{OnCallEnd: func(resilience.CallEndEvent) { order.add("second") }}
		}),
		transport.WithHooks(transport.Hooks{OnCallEnd: func(resilience.CallEndEvent) { order.add("third") }}),
	)
	if len(seen) != 1 || seen[0] != tr || unwrapped == nil {
		t.Fatalf("WithHooksFor's func saw %v (base %v), want the transport New returned, once", seen, unwrapped)
	}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://svc.test/", nil))
	closeResp(result{resp, err})
	if got, want := order.get(), []string{"first", "second", "third"}; !reflect.DeepEqual(got, want) {
		t.Errorf("OnCallEnd calls %v, want %v", got, want)
	}
	if msg := panicMessage(func() { transport.WithHooksFor(nil) }); !strings.Contains(msg, "WithHooksFor") {
		t.Errorf("WithHooksFor(nil) panicked with %q, want a message naming it", msg)
	}
}

type hookPanic struct{ hook string }

func TestPanickingHookPropagatesOutOfRoundTrip(t *testing.T) {
	boom := func(name string) func() { return func() { panic(hookPanic{name}) } }
	tests := []struct {
		name  string
		hooks func(p func()) transport.Hooks
		opts  []transport.Option
	}{
		{"OnCallStart", func(p func()) transport.Hooks {
			return transport.Hooks{OnCallStart: func(ctx context.Context, _ resilience.CallStartEvent) context.Context { p(); return ctx }}
		}, nil},
		{"OnAttemptStart", func(p func()) transport.Hooks {
			return transport.Hooks{OnAttemptStart: func(ctx context.Context, _ resilience.AttemptStartEvent) context.Context { p(); return ctx }}
		}, nil},
		{"OnAttemptEnd", func(p func()) transport.Hooks {
			return transport.Hooks{OnAttemptEnd: func(resilience.AttemptEndEvent) { p() }}
		}, nil},
		{"OnRetry", func(p func()) transport.Hooks { return transport.Hooks{OnRetry: func(resilience.RetryEvent) { p() }} }, nil},
		{"OnBackoff", func(p func()) transport.Hooks {
			return transport.Hooks{OnBackoff: func(resilience.BackoffEvent) { p() }}
		},
			[]transport.Option{transport.WithBackoff(resilience.Constant(time.Nanosecond))}},
		{"OnBudgetExhausted", func(p func()) transport.Hooks {
			return transport.Hooks{OnBudgetExhausted: func(resilience.BudgetEvent) { p() }}
		}, []transport.Option{transport.WithRetryBudget(0.01, 0)}},
		{"OnBreakerStateChange", func(p func()) transport.Hooks {
			return transport.Hooks{OnBreakerStateChange: func(resilience.BreakerStateEvent) { p() }}
		}, []transport.Option{transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 1})}},
		{"OnCallEnd", func(p func()) transport.Hooks {
			return transport.Hooks{OnCallEnd: func(resilience.CallEndEvent) { p() }}
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base, _ := sequence(status(503), status(200))
			tr := transport.New(base, append([]transport.Option{noDelay, transport.WithHooks(tc.hooks(boom(tc.name)))}, tc.opts...)...)
			var got any
			func() {
				defer func() { got = recover() }()
				resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://svc.test/", nil))
				closeResp(result{resp, err})
			}()
			if got != (hookPanic{tc.name}) {
				t.Errorf("recovered %v, want the hook's panic", got)
			}
		})
	}
}

// TestRequestHooksFireForAnInvalidPolicy pins the Hooks doc: OnCallStart
// fires when RoundTrip begins and OnCallEnd once just before it returns,
// including when the request is refused for an invalid Policy.
func TestRequestHooksFireForAnInvalidPolicy(t *testing.T) {
	base, _ := sequence(status(200))
	var starts events[resilience.CallStartEvent]
	var ends events[resilience.CallEndEvent]
	tr := transport.New(base, transport.WithHooks(transport.Hooks{
		OnCallStart: func(ctx context.Context, e resilience.CallStartEvent) context.Context {
			starts.add(e)
			return ctx
		},
		OnCallEnd: ends.add,
	}))
	req := newRequest(t, transport.WithPolicy(context.Background(), transport.Policy{MaxAttempts: -1}), http.MethodGet, "http://svc.test/", nil)
	resp, err := tr.RoundTrip(req)
	closeResp(result{resp, err})
	if got := starts.get(); len(got) != 1 || transport.RequestOf(got[0].Event) != req {
		t.Errorf("OnCallStart fired %d times, want once", len(got))
	}
	if got := ends.get(); len(got) != 1 || transport.RequestOf(got[0].Event) != req || got[0].Err != err || got[0].Attempts != 0 {
		t.Errorf("OnCallEnd %+v, want one event carrying the returned error %v", got, err)
	}
}
