package awssdk_test

import (
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// fault is what the faulty S3 endpoint does with one arrival instead of
// handing it to the real S3 implementation.
type fault int

const (
	pass          fault = iota // served by gofakes3
	internalError              // 500 InternalError, which S3 asks clients to retry
	slowDown                   // 503 SlowDown, S3's throttling answer
	reset                      // the connection is reset before any response
	stall                      // no response until the client gives up
)

func (f fault) String() string {
	return [...]string{"pass", "InternalError", "SlowDown", "reset", "stall"}[f]
}

// faultPlan picks the fault for the n-th arrival (from 1) of operation op.
type faultPlan func(op string, n int) fault

// s3Op names the S3 operation a request is, from its method and query, the
// way S3's REST API tells them apart.
func s3Op(r *http.Request) string {
	q := r.URL.Query()
	_, uploads := q["uploads"]
	switch {
	case r.Method == http.MethodPost && uploads:
		return "CreateMultipartUpload"
	case r.Method == http.MethodPost && q.Has("uploadId"):
		return "CompleteMultipartUpload"
	case r.Method == http.MethodPut && q.Has("partNumber"):
		return "UploadPart"
	case r.Method == http.MethodDelete && q.Has("uploadId"):
		return "AbortMultipartUpload"
	case r.Method == http.MethodPut && strings.Count(strings.Trim(r.URL.Path, "/"), "/") == 0:
		return "CreateBucket"
	case r.Method == http.MethodPut:
		return "PutObject"
	case r.Method == http.MethodGet:
		return "GetObject"
	case r.Method == http.MethodHead:
		return "HeadObject"
	}
	return r.Method + " " + r.URL.Path
}

// faultyS3 is a real S3 implementation (gofakes3 over memory) on loopback,
// behind a handler that injects faults and counts what arrives: every
// arrival per operation, and the arrivals that reached the implementation
// (its effects).
type faultyS3 struct {
	*httptest.Server

	mu       sync.Mutex // guards the fields below
	plan     faultPlan
	arrivals map[string]int // per operation, faulted or not
	effects  map[string]int // per operation, handed to gofakes3
}

// newFaultyS3 serves the faulty endpoint on 127.0.0.1, over TLS when tlsOn.
// The plan starts as "pass everything"; setPlan changes it.
func newFaultyS3(t testing.TB, tlsOn bool) *faultyS3 {
	t.Helper()
	fake := gofakes3.New(s3mem.New(), gofakes3.WithAutoBucket(true))
	f := &faultyS3{
		plan:     func(string, int) fault { return pass },
		arrivals: map[string]int{},
		effects:  map[string]int{},
	}
	real := fake.Server()
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := s3Op(r)
		f.mu.Lock()
		f.arrivals[op]++
		what := f.plan(op, f.arrivals[op])
		if what == pass {
			f.effects[op]++
		}
		f.mu.Unlock()
		serveFault(w, r, what, real)
	}))
	// The handshake a test fails on purpose is not news for the log.
	f.Config.ErrorLog = log.New(io.Discard, "", 0)
	if tlsOn {
		f.StartTLS()
	} else {
		f.Start()
	}
	t.Cleanup(f.Close)
	return f
}

// serveFault answers r as what says, or passes it to real.
func serveFault(w http.ResponseWriter, r *http.Request, what fault, real http.Handler) {
	switch what {
	case pass:
		real.ServeHTTP(w, r)
	case internalError:
		s3Error(w, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
	case slowDown:
		s3Error(w, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
	case reset:
		resetConn(w)
	case stall:
		// Hold the request until the client goes away (its per-attempt
		// timeout), or a minute as a backstop so a broken test still ends.
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
	}
}

// s3Error writes an error in S3's XML shape, which the SDK decodes into its
// error code.
func s3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+
		`<Error><Code>%s</Code><Message>%s</Message><RequestId>fault</RequestId></Error>`, code, msg)
}

// resetConn takes over the connection and closes it with SO_LINGER 0, so
// the client sees a TCP reset, not an orderly close.
func resetConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // cannot hijack (HTTP/2): abort the stream instead
	}
	raw := conn
	if tc, ok := conn.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	if tcp, ok := raw.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0) // best effort: a plain close still fails the request
	}
	_ = conn.Close() // the reset is the point; its error says nothing new
}

func (f *faultyS3) setPlan(p faultPlan) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.plan = p
}

// counts returns copies of the arrivals and effects, and zeroes them.
func (f *faultyS3) counts() (arrivals, effects map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	arrivals, effects = f.arrivals, f.effects
	f.arrivals, f.effects = map[string]int{}, map[string]int{}
	return arrivals, effects
}

// firstN fails the first n arrivals of each operation in ops with what.
func firstN(what fault, n int, ops ...string) faultPlan {
	return func(op string, k int) fault {
		for _, o := range ops {
			if o == op && k <= n {
				return what
			}
		}
		return pass
	}
}

// sortedOps renders counts in a stable order for the test log.
func sortedOps(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, m[k])
	}
	return strings.TrimSpace(b.String())
}
