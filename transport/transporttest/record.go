package transporttest

import (
	"bytes"
	"errors"
	"net/http"
	"net/url"
	"sync"
)

// Request is the record of one request the RoundTripper received: one
// attempt of gotry's.
type Request struct {
	// N is its place among all the requests the RoundTripper received,
	// from 1.
	N int
	// Attempt is the n its script was asked with: its place on its count
	// (its pattern's, and its key's with WithKey), from 1. It is 0 when no
	// script was asked: the request had no script, its context had already
	// ended when it arrived, or its body could not be read.
	Attempt int
	// Pattern is the Handle pattern that matched it; "" for New's script.
	Pattern string
	// Key is WithKey's key for it; "" without WithKey.
	Key string
	// Method, URL and Header are the request's, as sent (URL and Header
	// are copies): gotry's attempt header and trace context show here.
	Method string
	URL    *url.URL
	Header http.Header
	// Body is the request body, read to its end (nil for none).
	Body []byte
	// Step is the step its script chose (the zero Step until the script
	// has returned, or when no script was asked).
	Step Step
	// Done reports whether RoundTrip has returned for it, and Err is the
	// error it returned then (nil for a response): the step's Err, the
	// context's error when it ended first, or an error of the
	// RoundTripper's own.
	Done bool
	Err  error
}

// Requests returns the records of the requests received so far, in order
// of arrival; the slice and the records are the caller's.
func (rt *RoundTripper) Requests() []Request {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := make([]Request, len(rt.requests))
	for i, r := range rt.requests {
		out[i] = r
		out[i].URL = cloneURL(r.URL)
		out[i].Header = r.Header.Clone()
		out[i].Body = bytes.Clone(r.Body)
		out[i].Step.Header = r.Step.Header.Clone()
	}
	return out
}

// Count returns how many requests the RoundTripper has received: under
// gotry, how many attempts it made, first attempts, retries and hedges
// together.
func (rt *RoundTripper) Count() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return len(rt.requests)
}

// Unclosed returns how many of the response bodies the RoundTripper
// returned have not been closed yet. Under gotry, once the caller has
// closed the body of the response it got, it is 0: gotry closes every
// other.
func (rt *RoundTripper) Unclosed() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.unclosed
}

// arrive records req and, when ask is set, counts it on its route's count
// for key. It returns the record's index and the request's number on that
// count (0 when not counted).
func (rt *RoundTripper) arrive(req *http.Request, r *route, key string, body []byte, ask bool) (i, n int) {
	rec := Request{Pattern: r.pattern, Key: key, Method: method(req), URL: cloneURL(req.URL),
		Header: req.Header.Clone(), Body: body}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if ask && r.script != nil {
		r.counts[key]++
		n = r.counts[key]
	}
	rec.N, rec.Attempt = len(rt.requests)+1, n
	rt.requests = append(rt.requests, rec)
	return len(rt.requests) - 1, n
}

// chose records the step chosen for request i.
func (rt *RoundTripper) chose(i int, step Step) {
	rt.mu.Lock()
	rt.requests[i].Step = step
	rt.mu.Unlock()
}

// done records that RoundTrip returned err for request i.
func (rt *RoundTripper) done(i int, err error) {
	rt.mu.Lock()
	rt.requests[i].Done, rt.requests[i].Err = true, err
	rt.mu.Unlock()
}

func cloneURL(u *url.URL) *url.URL {
	if u == nil {
		return nil
	}
	c := *u
	if u.User != nil {
		user := *u.User
		c.User = &user
	}
	return &c
}

// errBodyClosed is what a response body read after Close returns, as
// net/http's does.
var errBodyClosed = errors.New("transporttest: read on closed response body")

// body is a response body that tells its RoundTripper when it is closed.
type body struct {
	rt     *RoundTripper
	mu     sync.Mutex // guards r and closed
	r      *bytes.Reader
	closed bool
}

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, errBodyClosed
	}
	return b.r.Read(p)
}

// Close marks the body closed; only its first call counts.
func (b *body) Close() error {
	b.mu.Lock()
	first := !b.closed
	b.closed = true
	b.mu.Unlock()
	if first {
		b.rt.mu.Lock()
		b.rt.unclosed--
		b.rt.mu.Unlock()
	}
	return nil
}
