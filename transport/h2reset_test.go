package transport_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// callLog records the attempt ends and the call end of a transport.
type callLog struct {
	attempts events[resilience.AttemptEndEvent]
	calls    events[resilience.CallEndEvent]
}

func (l *callLog) hooks() transport.Option {
	return transport.WithHooks(transport.Hooks{OnAttemptEnd: l.attempts.add, OnCallEnd: l.calls.add})
}

// firstClass is the class of the first attempt's error.
func (l *callLog) firstClass(t *testing.T) transport.ErrorClass {
	t.Helper()
	es := l.attempts.get()
	if len(es) == 0 {
		t.Fatal("no attempt ended")
	}
	return transport.ClassifyError(es[0].Err)
}

// reason is the call's end reason.
func (l *callLog) reason(t *testing.T) resilience.EndReason {
	t.Helper()
	cs := l.calls.get()
	if len(cs) != 1 {
		t.Fatalf("%d call ends, want 1", len(cs))
	}
	return cs[0].Reason
}

// TestHTTP2StreamResetByAPanickingHandler: Go's HTTP/2 server resets the
// stream of a handler that panics (RST_STREAM INTERNAL_ERROR), where an
// HTTP/1.1 server closes the connection. A GET, and a POST with an
// Idempotency-Key, are retried; a POST without one is not: the server may
// have done its work. Through net/http's own Transport over TLS.
func TestHTTP2StreamResetByAPanickingHandler(t *testing.T) {
	abort := func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }
	tests := []struct {
		name    string
		method  string
		key     bool
		retried bool
	}{
		{"GET", http.MethodGet, false, true},
		{"POST with Idempotency-Key", http.MethodPost, true, true},
		{"POST", http.MethodPost, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newFaultServer(t, true, abort, answerOK)
			var log callLog
			tr := transport.New(s.base(t), noDelay, log.hooks())
			req := newRequest(t, testCtx(t), tc.method, s.URL, strings.NewReader("order"))
			if tc.key {
				req.Header.Set("Idempotency-Key", "k-1")
			}
			resp, err := tr.RoundTrip(req)
			if got := log.firstClass(t); got != transport.ClassStreamReset {
				t.Errorf("first attempt's error class %v (%v), want stream_reset", got, log.attempts.get()[0].Err)
			}
			if !tc.retried {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("got %d, want the reset's error", resp.StatusCode)
				}
				if transport.ClassifyError(err) != transport.ClassStreamReset {
					t.Errorf("error %v, want the stream reset", err)
				}
				if n := s.count(); n != 1 {
					t.Errorf("server saw %d requests, want 1", n)
				}
				if r := log.reason(t); r != resilience.ReasonNotIdempotent {
					t.Errorf("end reason %v, want not_idempotent", r)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if body := readBody(t, resp); body != okBody || s.count() != 2 {
				t.Errorf("got %q after %d requests, want %q after 2", body, s.count(), okBody)
			}
		})
	}
}

// rawH2 is a minimal HTTP/2 server (h2c with prior knowledge) written with
// the standard library only, for the answers Go's own server never gives
// on demand: RST_STREAM REFUSED_STREAM, a GOAWAY that excludes a stream, a
// response without :status. It reads frames, does not decode the request's
// header block, and answers each request, numbered from 1 across its
// connections, as act says.
type rawH2 struct {
	ln      net.Listener
	act     func(n int) h2Action
	streams atomic.Int32 // requests (HEADERS frames) seen

	mu     sync.Mutex
	bodies []string // the bodies of the requests answered 200
	conns  []net.Conn
	wg     sync.WaitGroup
}

type h2Action int

const (
	h2Answer    h2Action = iota // 200 once the whole request has arrived
	h2Refuse                    // RST_STREAM REFUSED_STREAM at once
	h2Reset                     // RST_STREAM INTERNAL_ERROR at once
	h2GoAway                    // GOAWAY with last stream id 0: the stream was not processed
	h2GoAwayEnd                 // GOAWAY covering the stream, then the connection closes
	h2Malformed                 // a response HEADERS without :status
)

// HTTP/2 frame types and flags (RFC 9113 §6).
const (
	frameData     = 0x0
	frameHeaders  = 0x1
	frameRST      = 0x3
	frameSettings = 0x4
	frameGoAway   = 0x7
	flagEndStream = 0x1
	flagAck       = 0x1
	flagEndHdrs   = 0x4
)

func newRawH2(t *testing.T, act func(n int) h2Action) *rawH2 {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawH2{ln: ln, act: act}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				s.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *rawH2) answered() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies...)
}

// writeFrame writes one frame.
func writeFrame(w io.Writer, typ, flags byte, stream uint32, payload []byte) error {
	var h [9]byte
	h[0], h[1], h[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	h[3], h[4] = typ, flags
	binary.BigEndian.PutUint32(h[5:], stream)
	_, err := w.Write(append(h[:], payload...))
	return err
}

// serve runs one connection until the client closes it or act ends it.
func (s *rawH2) serve(c net.Conn) {
	preface := make([]byte, len("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	if _, err := io.ReadFull(c, preface); err != nil {
		return
	}
	if writeFrame(c, frameSettings, 0, 0, nil) != nil {
		return
	}
	code := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	answer := func(stream uint32) error {
		// 0x88: ":status: 200", entry 8 of HPACK's static table.
		return writeFrame(c, frameHeaders, flagEndHdrs|flagEndStream, stream, []byte{0x88})
	}
	bodies := map[uint32][]byte{}
	for {
		var h [9]byte
		if _, err := io.ReadFull(c, h[:]); err != nil {
			return
		}
		payload := make([]byte, int(h[0])<<16|int(h[1])<<8|int(h[2]))
		if _, err := io.ReadFull(c, payload); err != nil {
			return
		}
		typ, flags, stream := h[3], h[4], binary.BigEndian.Uint32(h[5:])&(1<<31-1)
		var err error
		switch typ {
		case frameSettings:
			if flags&flagAck == 0 {
				err = writeFrame(c, frameSettings, flagAck, 0, nil)
			}
		case frameHeaders:
			switch s.act(int(s.streams.Add(1))) {
			case h2Answer:
				bodies[stream] = []byte{}
				if flags&flagEndStream != 0 {
					s.record(nil)
					err = answer(stream)
				}
			case h2Refuse:
				err = writeFrame(c, frameRST, 0, stream, code(0x7))
			case h2Reset:
				err = writeFrame(c, frameRST, 0, stream, code(0x2))
			case h2GoAway:
				err = writeFrame(c, frameGoAway, 0, 0, append(code(0), code(0)...))
			case h2GoAwayEnd:
				_ = writeFrame(c, frameGoAway, 0, 0, append(code(stream), code(0)...)) // the connection closes either way
				return
			case h2Malformed:
				err = writeFrame(c, frameHeaders, flagEndHdrs|flagEndStream, stream, nil)
			}
		case frameData:
			b, ok := bodies[stream]
			if !ok {
				break // a stream refused or reset: its body is dropped
			}
			bodies[stream] = append(b, payload...)
			if flags&flagEndStream != 0 {
				s.record(bodies[stream])
				delete(bodies, stream)
				err = answer(stream)
			}
		}
		if err != nil {
			return
		}
	}
}

func (s *rawH2) record(body []byte) {
	s.mu.Lock()
	s.bodies = append(s.bodies, string(body))
	s.mu.Unlock()
}

// oneConnPerRequest is a base that sends each request on a new
// http.ClientConn: net/http's HTTP/2 client without the Transport's own
// retry loop, which would resend a refused stream itself before gotry
// could see it (see TestHTTP2RefusedStreamNetHTTPRetriesFirst). Its
// connections are closed when the test ends.
type oneConnPerRequest struct {
	tr   *http.Transport
	addr string

	mu    sync.Mutex
	conns []*http.ClientConn
}

func newOneConnPerRequest(t *testing.T, addr string) *oneConnPerRequest {
	b := &oneConnPerRequest{tr: h2cTransport(t), addr: addr}
	t.Cleanup(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, c := range b.conns {
			c.Close()
		}
	})
	return b
}

func (b *oneConnPerRequest) RoundTrip(r *http.Request) (*http.Response, error) {
	cc, err := b.tr.NewClientConn(r.Context(), "http", b.addr)
	if err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, err
	}
	b.mu.Lock()
	b.conns = append(b.conns, cc)
	b.mu.Unlock()
	return cc.RoundTrip(r)
}

// h2cTransport speaks HTTP/2 with prior knowledge to http:// URLs.
func h2cTransport(t *testing.T) *http.Transport {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: p}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// TestHTTP2RefusedStream: a stream the server refused (REFUSED_STREAM), or
// that its GOAWAY excluded, was not processed (RFC 9113 §8.7): any request
// is retried then, a POST without an idempotency key included, when its
// body can be replayed, and the replay carries the whole body. A reset
// that is no refusal leaves such a POST alone, and a StreamError the
// client made itself (a malformed response) is no reset from the server.
func TestHTTP2RefusedStream(t *testing.T) {
	replayable := func(t *testing.T, url string) *http.Request {
		return newRequest(t, testCtx(t), http.MethodPost, url, bytes.NewReader([]byte("order-1"))) // has a GetBody
	}
	oneShot := func(t *testing.T, url string) *http.Request {
		return newRequest(t, testCtx(t), http.MethodPost, url, io.NopCloser(strings.NewReader("order-1"))) // no GetBody
	}
	get := func(t *testing.T, url string) *http.Request {
		return newRequest(t, testCtx(t), http.MethodGet, url, nil)
	}
	tests := []struct {
		name    string
		first   h2Action
		req     func(*testing.T, string) *http.Request
		class   transport.ErrorClass
		retried bool
		reason  resilience.EndReason // when not retried
	}{
		{"POST refused", h2Refuse, replayable, transport.ClassStreamRefused, true, 0},
		{"POST excluded by GOAWAY", h2GoAway, replayable, transport.ClassStreamRefused, true, 0},
		{"POST refused, body not replayable", h2Refuse, oneShot, transport.ClassStreamRefused, false, resilience.ReasonNotIdempotent},
		{"POST reset", h2Reset, replayable, transport.ClassStreamReset, false, resilience.ReasonNotIdempotent},
		{"GET reset", h2Reset, get, transport.ClassStreamReset, true, 0},
		{"GET cut by a GOAWAY and a close", h2GoAwayEnd, get, transport.ClassConnectionClosed, true, 0},
		{"GET answered without :status", h2Malformed, get, transport.ClassOther, false, resilience.ReasonNotRetryable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newRawH2(t, func(n int) h2Action {
				if n == 1 {
					return tc.first
				}
				return h2Answer
			})
			var log callLog
			tr := transport.New(newOneConnPerRequest(t, s.ln.Addr().String()), noDelay, log.hooks())
			req := tc.req(t, "http://"+s.ln.Addr().String()+"/orders")
			resp, err := tr.RoundTrip(req)
			if got := log.firstClass(t); got != tc.class {
				t.Errorf("first attempt's error class %v (%v), want %v", got, log.attempts.get()[0].Err, tc.class)
			}
			if !tc.retried {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("got %d, want the first attempt's error", resp.StatusCode)
				}
				if n := s.streams.Load(); n != 1 {
					t.Errorf("server saw %d requests, want 1", n)
				}
				if r := log.reason(t); r != tc.reason {
					t.Errorf("end reason %v, want %v", r, tc.reason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || s.streams.Load() != 2 {
				t.Errorf("got %d after %d requests, want 200 after 2", resp.StatusCode, s.streams.Load())
			}
			want := ""
			if req.Method == http.MethodPost {
				want = "order-1"
			}
			if got := s.answered(); len(got) != 1 || got[0] != want {
				t.Errorf("the answered request carried %q, want [%q]", got, want)
			}
		})
	}
}

// TestHTTP2RefusedStreamNetHTTPRetriesFirst pins what the package doc says
// of net/http's Transport: it resends a refused stream itself (at once,
// the first time) when it can replay the body, so gotry sees one attempt
// and the server two requests.
func TestHTTP2RefusedStreamNetHTTPRetriesFirst(t *testing.T) {
	s := newRawH2(t, func(n int) h2Action {
		if n == 1 {
			return h2Refuse
		}
		return h2Answer
	})
	var log callLog
	tr := transport.New(h2cTransport(t), noDelay, log.hooks())
	resp, err := tr.RoundTrip(newRequest(t, testCtx(t), http.MethodPost, "http://"+s.ln.Addr().String()+"/", bytes.NewReader([]byte("x"))))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n, a := s.streams.Load(), len(log.attempts.get()); n != 2 || a != 1 {
		t.Errorf("server saw %d requests and gotry %d attempts, want 2 and 1", n, a)
	}
}

// TestHTTP2RefusedStreamPOSTIsNeverHedged: a POST allowed further attempts
// for a refused stream is still never hedged, so it cannot arrive twice.
func TestHTTP2RefusedStreamPOSTIsNeverHedged(t *testing.T) {
	release := make(chan struct{})
	s := newFaultServer(t, true, func(w http.ResponseWriter, r *http.Request) {
		<-release
		answerOK(w, r)
	})
	var log callLog
	tr := transport.New(s.base(t), noDelay, transport.WithHedging(1, 1), log.hooks())
	ch := goRoundTrip(tr, newRequest(t, testCtx(t), http.MethodPost, s.URL, bytes.NewReader([]byte("x"))))
	recvHit(t, s)
	close(release)
	r := recv(t, ch, "the answer")
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.resp.Body.Close()
	if n, a := s.count(), len(log.attempts.get()); n != 1 || a != 1 {
		t.Errorf("server saw %d requests in %d attempts, want 1 in 1", n, a)
	}
}

// recvHit waits until s has seen a request.
func recvHit(t *testing.T, s *faultServer) {
	t.Helper()
	if !waitFor(func() bool { return s.count() > 0 }) {
		t.Fatal("the server never saw the request")
	}
}

// TestStreamClassesNamesAndRules: the names error.type carries, and both
// classes are retryable by class (the eligibility of the request decides
// the rest).
func TestStreamClassesNamesAndRules(t *testing.T) {
	for c, name := range map[transport.ErrorClass]string{
		transport.ClassStreamReset:   "stream_reset",
		transport.ClassStreamRefused: "stream_refused",
	} {
		if c.String() != name || !c.Retryable() {
			t.Errorf("%d: %q, retryable %v; want %q, retryable", int(c), c.String(), c.Retryable(), name)
		}
	}
}
