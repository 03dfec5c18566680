package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MrVSiK/gotry/resilience"
)

// replayable reports whether a body can be sent again without buffering.
func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// bufferBody reads req.Body so it can be replayed. It reads at most limit+1
// bytes: if the body fits, it closes the original and returns a getter for
// fresh readers over the buffer; if not, it returns the body to send once
// (what was read, then the rest, closing the original) and a nil getter.
// Reading is bounded by the request's context, as sending it would be: when
// the context ends first, the body is closed (which interrupts a pending
// read on any body that supports it, such as a pipe) and the error returned.
func bufferBody(req *http.Request, limit int64) (getBody func() (io.ReadCloser, error), once io.ReadCloser, err error) {
	hint := int64(512)
	if req.ContentLength > 0 && req.ContentLength <= limit {
		hint = req.ContentLength + 1 // +1 so reading EOF needs no regrowth
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		req.Body.Close()
		return nil, nil, err
	}
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() { req.Body.Close() })
		defer stop()
	}
	buf := bytes.NewBuffer(make([]byte, 0, hint))
	n, err := buf.ReadFrom(io.LimitReader(req.Body, limit+1))
	if err == nil && ctx.Err() != nil {
		err = ctx.Err() // the close came after the last read; the body may be cut
	}
	if err != nil {
		req.Body.Close()
		return nil, nil, err
	}
	if n > limit {
		return nil, &prefixedBody{Reader: io.MultiReader(bytes.NewReader(buf.Bytes()), req.Body), c: req.Body}, nil
	}
	req.Body.Close()
	data := buf.Bytes()
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }, nil, nil
}

// prefixedBody is a body already partly read, sent once.
type prefixedBody struct {
	io.Reader
	c io.Closer
}

func (p *prefixedBody) Close() error { return p.c.Close() }

// closeResponse closes a response that will not be returned, without
// reading it: its attempt is cancelled, or its body was already retained.
func closeResponse(resp *http.Response) {
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
}

// retainBody reads rc, the body of a retryable response that a later
// attempt supersedes, into memory, so that its connection goes back to the
// pool at once instead of being held through the backoff and the next
// attempt (which, with a base limited to one connection per host, would wait
// for it forever). It reads at most limit+1 bytes, for at most retainTimeout
// and never past ctx: when either ends first, rc is closed from another
// goroutine, which interrupts the read on net/http's bodies. rc is always
// closed. The returned body yields exactly the bytes kept and then EOF, or,
// when the body was cut (too long, interrupted, or broken), those bytes and
// then an error matching ErrBodyTruncated.
//
// The time limit is read on the real clock, not the transport's: it bounds
// real I/O, which no fake clock can hurry.
func retainBody(ctx context.Context, rc io.ReadCloser, limit int64) io.ReadCloser {
	var (
		mu    sync.Mutex
		cause error // why rc was closed under the reader, if it was
	)
	interrupt := func(why error) func() {
		return func() {
			mu.Lock()
			if cause == nil {
				cause = why
			}
			mu.Unlock()
			rc.Close()
		}
	}
	t := time.AfterFunc(retainTimeout, interrupt(fmt.Errorf("reading it took longer than %v", retainTimeout)))
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, interrupt(ctx.Err()))
	}
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(rc, limit+1))
	t.Stop()
	if stop != nil {
		stop()
	}
	rc.Close()
	mu.Lock()
	why := cause
	mu.Unlock()
	if why == nil && ctx.Err() != nil {
		why = context.Cause(ctx)
	}
	switch {
	case err == nil && n <= limit: // read to its end, whatever fired after
		if buf.Len() == 0 {
			return http.NoBody
		}
		return &keptBody{r: bytes.NewReader(buf.Bytes())}
	case why != nil:
		err = fmt.Errorf("%w: %w", ErrBodyTruncated, why)
	case err != nil:
		err = fmt.Errorf("%w: reading it failed: %w", ErrBodyTruncated, err)
	case n > limit:
		buf.Truncate(int(limit))
		err = fmt.Errorf("%w: longer than the %d bytes kept (WithMaxRetainedBody)", ErrBodyTruncated, limit)
	}
	return &keptBody{r: io.MultiReader(bytes.NewReader(buf.Bytes()), errReader{err})}
}

// keptBody is a retained body: bytes in memory, which fail to read once
// the body is closed, as net/http's bodies do.
type keptBody struct {
	r      io.Reader
	closed atomic.Bool
}

func (b *keptBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, http.ErrBodyReadAfterClose
	}
	return b.r.Read(p)
}

func (b *keptBody) Close() error {
	b.closed.Store(true)
	return nil
}

// errReader fails every read with err.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// bodyEnd is what happens when the returned body is finished: the engine's
// Result.Finish, which releases the winning attempt's context and fires
// OnResultDone.
type bodyEnd = resilience.Finisher

// endBody wraps an attempt's response body so that what waits for the
// body's end runs exactly once, when it is closed or read to its end (or to
// an error): the attempt's header-timeout context is cancelled (see
// headerTimer.finish), and the returned response's end is told (see track).
// One wrapper serves both: track adopts the one the header timer put on the
// body instead of wrapping it again.
type endBody struct {
	rc       io.ReadCloser
	cancel   context.CancelCauseFunc // the header timeout's context; nil without one
	end      bodyEnd                 // the returned response's end; zero until track sets it
	finished atomic.Bool             // the end has been (or is being) acted on; it is, once
	tracked  bool                    // track has set end
}

func (b *endBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil {
		if errors.Is(err, io.EOF) {
			b.done(nil)
		} else {
			b.done(err)
		}
	}
	return n, err
}

func (b *endBody) Close() error {
	err := b.rc.Close()
	b.done(nil)
	return err
}

func (b *endBody) done(err error) {
	if b.finished.CompareAndSwap(false, true) {
		if b.cancel != nil {
			b.cancel(nil)
		}
		b.end.Finish(err)
	}
}

// endRWBody keeps io.Writer for 101 Switching Protocols bodies, which
// are live connections.
type endRWBody struct {
	endBody
	w io.Writer
}

func (b *endRWBody) Write(p []byte) (int, error) { return b.w.Write(p) }

// wrapEnd puts a new endBody on resp.Body, which is neither nil nor
// http.NoBody, and returns it.
func wrapEnd(resp *http.Response) *endBody {
	if rw, ok := resp.Body.(io.ReadWriteCloser); ok && resp.StatusCode == http.StatusSwitchingProtocols {
		b := &endRWBody{endBody: endBody{rc: rw}, w: rw}
		resp.Body = b
		return &b.endBody
	}
	b := &endBody{rc: resp.Body}
	resp.Body = b
	return b
}

// untracked returns resp.Body's endBody when it has one that nothing has
// ended or tracked yet (as the header timer leaves it), and nil otherwise.
// Setting its end acts as a second wrapper around it would: the header
// timeout's context is cancelled first, then the end is told.
func untracked(resp *http.Response) *endBody {
	var b *endBody
	switch v := resp.Body.(type) {
	case *endBody:
		b = v
	case *endRWBody:
		b = &v.endBody
	}
	if b == nil || b.tracked || b.finished.Load() {
		return nil
	}
	return b
}

// track arranges for end to run when resp.Body is finished. A response
// with nothing to read (see empty) is finished at once, so its attempt's
// context and telemetry end with RoundTrip, and not with a Close that
// callers often skip on an empty body.
func track(resp *http.Response, method string, end bodyEnd) {
	if resp.Body == nil || resp.Body == http.NoBody {
		end.Finish(nil)
		return
	}
	if empty(resp, method) {
		// Not http.NoBody, but nothing to read: Go 1.26's HTTP/2 client
		// answers its own empty body here, and so may another base. It is
		// closed now, which is all such a body needs (reading could wait
		// on a stream that has yet to end), and the caller gets http.NoBody.
		resp.Body.Close()
		resp.Body = http.NoBody
		end.Finish(nil)
		return
	}
	b := untracked(resp)
	if b == nil {
		b = wrapEnd(resp)
	}
	b.end, b.tracked = end, true
}

// empty reports whether resp, the answer to a method request, has nothing
// to read, by what it is rather than by its body's type: the answer to a
// HEAD, a 204 No Content or a 304 Not Modified (which have no content
// whatever the base says), or one whose header declares a Content-Length
// of 0. (http.Transport answers all of them with http.NoBody over HTTP/1.1
// and, from Go 1.27, over HTTP/2; Go 1.26's HTTP/2 client does not.) A
// ContentLength of 0 alone is not enough: a hand-built response (a test's
// fake base) often leaves it 0 above a body with content.
func empty(resp *http.Response, method string) bool {
	switch {
	case method == http.MethodHead:
		return true
	case resp.StatusCode == http.StatusNoContent, resp.StatusCode == http.StatusNotModified:
		return true
	}
	cl := resp.Header["Content-Length"] // (a direct lookup: the key is canonical)
	return resp.ContentLength == 0 && len(cl) == 1 && cl[0] == "0"
}
