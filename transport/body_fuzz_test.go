package transport_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// errFuzzRead is the failure of a fuzzed request body.
var errFuzzRead = errors.New("fuzz: request body read failed")

// fuzzBody serves data in reads of at most chunk bytes and fails with
// errFuzzRead once failAt bytes have been read (never when failAt < 0).
type fuzzBody struct {
	data    []byte
	off     int
	chunk   int
	failAt  int
	closed  atomic.Int32
	onClose func()
}

func (b *fuzzBody) Read(p []byte) (int, error) {
	if b.failAt >= 0 && b.off >= b.failAt {
		return 0, errFuzzRead
	}
	if b.off >= len(b.data) {
		return 0, io.EOF
	}
	n := len(p)
	if b.chunk > 0 {
		n = min(n, b.chunk)
	}
	if b.failAt >= 0 {
		n = min(n, b.failAt-b.off)
	}
	n = copy(p[:n], b.data[b.off:])
	b.off += n
	return n, nil
}

func (b *fuzzBody) Close() error {
	if b.closed.Add(1) == 1 && b.onClose != nil {
		b.onClose()
	}
	return nil
}

// FuzzBodyReplay sends bodies of sizes around the WithMaxBufferedBody limit,
// from readers that return arbitrary chunk sizes and may fail mid-way, with
// and without GetBody, to an in-memory base that reads the whole body and
// fails the first attempt with a retryable error. What the base receives on
// every attempt is exactly the caller's body, or the request was sent once;
// a failing reader surfaces its error; every body the caller handed over
// (and every one GetBody made) is closed; and no more than the limit plus
// one byte is read ahead of the first attempt (nothing when the request
// gets one attempt or has GetBody).
func FuzzBodyReplay(f *testing.F) {
	for _, s := range []struct {
		limit  uint16
		delta  int16
		failAt int32
		chunk  uint8
		flags  uint8
	}{
		{64, 0, -1, 0, 0},      // exactly at the limit, PUT, buffered
		{64, 1, -1, 7, 0},      // one byte over: sent once
		{64, -1, -1, 1, 0},     // one byte under
		{64, 1, -1, 0, 1},      // over the limit but GetBody replays it
		{64, 10, 30, 3, 0},     // fails while buffering
		{64, 10, 70, 3, 0},     // fails after the limit: sent once, fails in the base
		{64, 0, 64, 0, 0},      // fails instead of EOF
		{0, 0, -1, 0, 0},       // empty body, limit 0
		{0, 5, -1, 0, 2},       // limit 0, exact ContentLength
		{100, 0, -1, 0, 2 | 8}, // POST: never repeated
		{100, 50, -1, 5, 4},    // ContentLength -1
		{100, -20, 40, 2, 1},   // GetBody bodies fail too
	} {
		f.Add(s.limit, s.delta, s.failAt, s.chunk, s.flags)
	}
	f.Fuzz(func(t *testing.T, limit16 uint16, delta int16, failAt32 int32, chunk uint8, flags uint8) {
		limit := int64(limit16)
		size := max(0, int(limit)+int(delta))
		failAt := int(failAt32)
		if failAt > size {
			failAt = -1 // past the end: no failure
		}
		failAt = max(failAt, -1)
		withGetBody := flags&1 != 0
		clMode := (flags >> 1) & 3 // 0 unknown (0), 1 exact, 2 -1
		method := http.MethodPut
		if flags&8 != 0 {
			method = http.MethodPost
		}
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*7 + int(flags))
		}

		var made, closed atomic.Int32
		newBody := func() *fuzzBody {
			made.Add(1)
			return &fuzzBody{data: data, chunk: int(chunk), failAt: failAt, onClose: func() { closed.Add(1) }}
		}
		var mu sync.Mutex
		var received [][]byte
		var readErrs []error
		var caller *fuzzBody
		preRead := -1 // bytes taken from the caller's body before the first attempt
		base := baseFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			if preRead < 0 {
				preRead = caller.off
			}
			mu.Unlock()
			var got []byte
			var err error
			if r.Body != nil {
				got, err = io.ReadAll(r.Body)
				r.Body.Close()
			}
			mu.Lock()
			received = append(received, got)
			readErrs = append(readErrs, err)
			n := len(received)
			mu.Unlock()
			if err != nil {
				return nil, fmt.Errorf("fuzz base: reading the request body: %w", err)
			}
			if n == 1 {
				return nil, errMemReset
			}
			return memResponse(r, http.StatusOK, "ok"), nil
		})
		tr := transport.New(base, transport.WithMaxAttempts(2), transport.WithRetryBudget(0, 0),
			transport.WithBackoff(resilience.Constant(0)), transport.WithMaxBufferedBody(limit))

		caller = newBody()
		req, err := http.NewRequest(method, "http://body.test/", caller)
		if err != nil {
			t.Fatal(err)
		}
		switch clMode {
		case 1:
			req.ContentLength = int64(size)
		case 2:
			req.ContentLength = -1
		}
		if withGetBody {
			req.GetBody = func() (io.ReadCloser, error) { return newBody(), nil }
		}
		resp, err := tr.RoundTrip(req)
		if (resp == nil) == (err == nil) {
			t.Fatalf("RoundTrip returned resp=%v err=%v: exactly one must be set", resp, err)
		}
		if resp != nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if caller.closed.Load() == 0 {
			t.Fatal("the caller's body was never closed")
		}
		if m, c := made.Load(), closed.Load(); c != m {
			t.Fatalf("%d request bodies made, %d closed", m, c)
		}

		mu.Lock()
		defer mu.Unlock()
		// Never read ahead more than the limit and the one byte that shows
		// the body is over it; not at all when one attempt is all it gets
		// or GetBody can replay it.
		unread := withGetBody || method == http.MethodPost || clMode == 1 && int64(size) > limit
		switch {
		case preRead > int(limit)+1:
			t.Fatalf("%d bytes read ahead of the first attempt, limit %d", preRead, limit)
		case unread && preRead > 0:
			t.Fatalf("%d bytes read ahead of the only attempt (method %s, GetBody %v, ContentLength mode %d)", preRead, method, withGetBody, clMode)
		}
		desc := fmt.Sprintf("%s size %d limit %d failAt %d chunk %d GetBody %v clMode %d", method, size, limit, failAt, chunk, withGetBody, clMode)
		if failAt >= 0 {
			if err == nil || !errors.Is(err, errFuzzRead) {
				t.Fatalf("%s: reader failed, RoundTrip err = %v, want it to surface errFuzzRead", desc, err)
			}
			for i, got := range received {
				if !bytes.Equal(got, data[:failAt]) {
					t.Fatalf("%s: attempt %d received %d bytes, want the %d before the failure", desc, i+1, len(got), failAt)
				}
			}
			if len(received) > 1 {
				t.Fatalf("%s: a failed body was sent %d times", desc, len(received))
			}
			return
		}
		for i, got := range received {
			if !bytes.Equal(got, data) || readErrs[i] != nil {
				t.Fatalf("%s: attempt %d received %d bytes (err %v), want exactly the caller's %d", desc, i+1, len(got), readErrs[i], size)
			}
		}
		replayable := method == http.MethodPut && (withGetBody || int64(size) <= limit)
		if replayable {
			if len(received) != 2 || err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %d attempts, err %v; want the retry to succeed", desc, len(received), err)
			}
			return
		}
		if len(received) != 1 {
			t.Fatalf("%s: sent %d times, want once", desc, len(received))
		}
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("%s: err = %v, want the single attempt's reset", desc, err)
		}
		var ge *transport.Error
		if errors.As(err, &ge) {
			t.Fatalf("%s: a single attempt's error came back wrapped: %v", desc, err)
		}
	})
}
