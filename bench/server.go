package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"
)

// backend is a loopback server whose behaviour a scenario sets. It counts
// every request it receives; the count is what "load" means in the tables.
type backend struct {
	srv *httptest.Server

	requests atomic.Int64 // requests received since reset
	// stallEvery > 0 makes every stallEvery-th request (by the counter)
	// wait stallFor, or until the client goes away.
	stallEvery atomic.Int64
	stallFor   atomic.Int64 // nanoseconds
	// baseDelay: every request waits this long (nanoseconds) before it is
	// answered, or until the client goes away.
	baseDelay atomic.Int64
	// slots, when not nil, bounds how many requests are served at once (a worker pool): the others wait
	// their turn, so extra load costs latency as on a real server.
	slots chan struct{}
	// downUntil: requests arriving before this UnixNano answer 503.
	downUntil atomic.Int64
	// buckets, when set, count requests per bucketWidth since bucketStart.
	buckets     atomic.Pointer[[]atomic.Int64]
	bucketStart atomic.Int64 // UnixNano
	// model, when set, draws every arrival's latency on its own (see
	// latencyModel).
	model atomic.Pointer[latencyModel]
}

const bucketWidth = 100 * time.Millisecond

func newBackend() *backend { return newBackendSlots(0) }

// newBackendSlots is newBackend serving at most slots requests at once (0:
// no bound).
func newBackendSlots(slots int) *backend {
	b := &backend{}
	if slots > 0 {
		b.slots = make(chan struct{}, slots)
	}
	b.srv = httptest.NewServer(http.HandlerFunc(b.serve))
	return b
}

func (b *backend) URL() string { return b.srv.URL }

func (b *backend) Close() { b.srv.Close() }

// reset zeroes the counter and restores plain 200 answers.
func (b *backend) reset() {
	b.requests.Store(0)
	b.stallEvery.Store(0)
	b.stallFor.Store(0)
	b.baseDelay.Store(0)
	b.downUntil.Store(0)
	b.buckets.Store(nil)
	b.model.Store(nil)
}

// countBuckets starts per-bucketWidth counting from start over d.
func (b *backend) countBuckets(start time.Time, d time.Duration) {
	s := make([]atomic.Int64, int(d/bucketWidth)+2)
	b.bucketStart.Store(start.UnixNano())
	b.buckets.Store(&s)
}

// bucketCounts returns the per-bucket counts.
func (b *backend) bucketCounts() []int64 {
	p := b.buckets.Load()
	if p == nil {
		return nil
	}
	out := make([]int64, len(*p))
	for i := range *p {
		out[i] = (*p)[i].Load()
	}
	return out
}

func (b *backend) serve(w http.ResponseWriter, r *http.Request) {
	n := b.requests.Add(1)
	now := time.Now().UnixNano()
	if p := b.buckets.Load(); p != nil {
		if i := (now - b.bucketStart.Load()) / int64(bucketWidth); i >= 0 && int(i) < len(*p) {
			(*p)[i].Add(1)
		}
	}
	if now < b.downUntil.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "down") // a client that went away cannot be told
		return
	}
	if b.slots != nil {
		select {
		case b.slots <- struct{}{}:
			defer func() { <-b.slots }()
		case <-r.Context().Done():
			return // the client gave up while queued
		}
	}
	if m := b.model.Load(); m != nil && !sleepCtx(r.Context(), m.draw(n)) {
		return // the client gave up (a hedge won)
	}
	if d := b.baseDelay.Load(); d > 0 && !sleepCtx(r.Context(), time.Duration(d)) {
		return // the client gave up
	}
	if every := b.stallEvery.Load(); every > 0 && n%every == 0 {
		if !sleepCtx(r.Context(), time.Duration(b.stallFor.Load())) {
			return // the client gave up (a hedge won): nothing to answer
		}
	}
	_, _ = io.WriteString(w, "ok") // a client that went away cannot be told
}

// sleepCtx sleeps d unless ctx ends first; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// memBase answers every request from memory with a fresh 200 and an empty
// body: the "bare" of the in-memory tables, so they measure the wrapper.
type memBase struct{}

func (memBase) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Body: emptyBody{}, Request: r}, nil
}

// emptyBody is an empty response body that is not http.NoBody: gotry
// finishes a NoBody response at once, unwrapped, while a response with a
// body to read is the case the overhead tables are about. (A value of no
// size: no allocation.)
type emptyBody struct{}

func (emptyBody) Read([]byte) (int, error) { return 0, io.EOF }
func (emptyBody) Close() error             { return nil }

// newLoopbackBase is the base transport every loopback candidate wraps.
func newLoopbackBase() *http.Transport {
	return &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: 30 * time.Second}
}

// finish reads a response to its end and closes it, as a careful caller does.
func finish(resp *http.Response) {
	if resp != nil && resp.Body != nil {
		_, _ = io.Copy(io.Discard, resp.Body) // draining is best effort: the body is closed either way
		resp.Body.Close()
	}
}
