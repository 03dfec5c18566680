package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
)

// replayable reports whether a body can be sent again without buffering.
func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// bufferBody reads req.Body so it can be replayed. It reads at most limit+1
// bytes: if the body fits, it closes the original and returns a getter for
// fresh readers over the buffer; if not, it returns the body to send once
// (what was read, then the rest, closing the original) and a nil getter.
func bufferBody(req *http.Request, limit int64) (getBody func() (io.ReadCloser, error), once io.ReadCloser, err error) {
	hint := int64(512)
	if req.ContentLength > 0 && req.ContentLength <= limit {
		hint = req.ContentLength + 1 // +1 so reading EOF needs no regrowth
	}
	buf := bytes.NewBuffer(make([]byte, 0, hint))
	n, err := buf.ReadFrom(io.LimitReader(req.Body, limit+1))
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

// drain reads up to drainLimit of a discarded response body, so the
// connection can be reused, and closes it.
func drain(resp *http.Response) {
	if resp == nil || resp.Body == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, resp.Body, drainLimit)
	resp.Body.Close()
}

// bodyEnd is what happens when the returned body is finished: the winning
// attempt's context is released and OnBodyClosed fires.
type bodyEnd struct {
	cancel  context.CancelCauseFunc
	hook    func(BodyClosedEvent)
	ctx     context.Context
	req     *http.Request
	attempt int
}

func (e *bodyEnd) run(err error) {
	if e.cancel != nil {
		e.cancel(nil)
	}
	if e.hook != nil {
		e.hook(BodyClosedEvent{Context: e.ctx, Request: e.req, Attempt: e.attempt, Err: err})
	}
}

// trackedBody wraps the returned response body so that its end runs exactly
// once: when the body is closed or read to its end.
type trackedBody struct {
	rc   io.ReadCloser
	once sync.Once
	end  bodyEnd
}

func (b *trackedBody) Read(p []byte) (int, error) {
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

func (b *trackedBody) Close() error {
	err := b.rc.Close()
	b.done(nil)
	return err
}

func (b *trackedBody) done(err error) {
	b.once.Do(func() { b.end.run(err) })
}

// trackedRWBody keeps io.Writer for 101 Switching Protocols bodies, which
// are live connections.
type trackedRWBody struct {
	trackedBody
	w io.Writer
}

func (b *trackedRWBody) Write(p []byte) (int, error) { return b.w.Write(p) }

// track wraps resp.Body so end runs when it is finished.
func track(resp *http.Response, end bodyEnd) {
	if resp.Body == nil {
		end.run(nil)
		return
	}
	if rw, ok := resp.Body.(io.ReadWriteCloser); ok && resp.StatusCode == http.StatusSwitchingProtocols {
		resp.Body = &trackedRWBody{trackedBody: trackedBody{rc: rw, end: end}, w: rw}
		return
	}
	resp.Body = &trackedBody{rc: resp.Body, end: end}
}
