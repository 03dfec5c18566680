package transporttest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// SlowLink is a TCP proxy on loopback whose two directions each carry at
// most a set number of bytes per second: a link slower than loopback, for
// testing uploads and downloads against a server in the same process (an
// httptest.Server). Point the client at URL (or Addr) instead of at the
// server; every connection made to it is forwarded to the target.
//
// # The model
//
// The link paces its reads, not its writes: it reads at most a chunk from
// one side, writes it to the other, and reads that side again only once
// the link would have carried the chunk at its rate. Meanwhile the bytes
// the sender writes wait in the kernel's buffers: its socket's send buffer
// and the link's receive buffer, megabytes on Linux. So a client's writes
// go at memory speed until those buffers are full, and at the link's rate
// from then on; the write of a request ends (httptrace's WroteRequest)
// while the buffers still hold what the server will receive seconds later.
// That is what a real slow link does, with the network's queues in the
// buffers' place, and it is what code that starts a clock at the end of a
// write (a header timeout, an upload deadline, a progress report) gets
// wrong.
//
// Throttling the request body instead (a reader that yields its bytes
// slowly) does not show it: the sender's socket never fills, so its write
// ends when the server has nearly all of it, and such code passes a test
// it would fail over a real link. A throttled body also leaves the
// response, the headers and every other connection at loopback speed.
//
// A chunk is 10 ms of the link (at most 16 KiB, at least a byte): the most
// the link forwards at once, small next to the times a test measures, and
// long enough that the pacing waits (a hundred a second) cost little. The
// link may run up to 10 ms ahead of its rate after a pause, so that a wait
// a loaded machine ends late is made up by the next chunks instead of
// lowering the rate; an idle link saves no more credit than that.
//
// Each direction is paced on its own, connection by connection: the rates
// are per connection, not shared. A half-close is carried over (the end of
// one side's writes ends the link's writes to the other side, whose answer
// still comes back); an error on either side, or the end of both
// directions, closes both connections. The link adds no latency of its
// own beyond loopback's and its pacing.
//
// It runs on the wall clock, since it paces real sockets: it has no place
// in a testing/synctest bubble or under a fake clock, whose time a socket
// does not follow. It is safe for concurrent use; Close stops it.
type SlowLink struct {
	ln       net.Listener
	target   string             // the address every connection is forwarded to
	up, down int                // bytes per second; 0: not throttled
	ctx      context.Context    // the link's lifetime: its dials and pacing waits end with it
	cancel   context.CancelFunc // ends ctx; called by Close
	wg       sync.WaitGroup     // the accept loop and each connection's goroutines

	mu     sync.Mutex // guards conns and closed
	conns  map[net.Conn]struct{}
	closed bool
}

// NewSlowLink starts a link on loopback to target, a TCP address
// ("127.0.0.1:8080", an httptest.Server's Listener.Addr().String()), that
// carries upRate bytes per second from the client to target and downRate
// from target to the client; 0 leaves a direction unthrottled. It fails if
// a rate is negative, if target is not a host:port (a URL, say), or if it
// cannot listen. Close it when done; in a test, StartSlowLink does.
func NewSlowLink(target string, upRate, downRate int) (*SlowLink, error) {
	if upRate < 0 || downRate < 0 {
		return nil, fmt.Errorf("transporttest: SlowLink rates must not be negative, got up %d, down %d", upRate, downRate)
	}
	if _, _, err := net.SplitHostPort(target); err != nil || strings.Contains(target, "/") {
		return nil, fmt.Errorf("transporttest: SlowLink target %q is not a host:port address", target)
	}
	ln, err := listenLoopback()
	if err != nil {
		return nil, fmt.Errorf("transporttest: SlowLink: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &SlowLink{ln: ln, target: target, up: upRate, down: downRate,
		ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

// StartSlowLink is NewSlowLink for a test: it fails tb on an error and
// closes the link when tb ends (tb.Cleanup). Most tests want this one.
// Start the link after the server it forwards to, so that the link is
// closed first.
func StartSlowLink(tb testing.TB, target string, upRate, downRate int) *SlowLink {
	tb.Helper()
	l, err := NewSlowLink(target, upRate, downRate)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(l.Close)
	return l
}

// listenLoopback listens on a free port of 127.0.0.1, or of [::1] where
// there is no IPv4.
func listenLoopback() (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err == nil {
		return ln, nil
	}
	if ln6, err6 := net.Listen("tcp6", "[::1]:0"); err6 == nil {
		return ln6, nil
	}
	return nil, err
}

// Addr is the address the link listens on, host:port.
func (l *SlowLink) Addr() string { return l.ln.Addr().String() }

// URL is "http://" and Addr: the base URL of a plain HTTP server behind the
// link. For a TLS server use "https://" + Addr; the link carries TLS as
// any other bytes, and an httptest.Server's certificate is valid for it.
func (l *SlowLink) URL() string { return "http://" + l.Addr() }

// Close stops the link: it stops listening, closes every connection it
// carries (both sides) and waits until its goroutines have returned. It
// may be called more than once.
func (l *SlowLink) Close() {
	l.mu.Lock()
	conns := l.conns
	l.conns, l.closed = nil, true
	l.mu.Unlock()
	l.cancel()
	l.ln.Close() // a second Close's error says nothing
	for c := range conns {
		c.Close()
	}
	l.wg.Wait()
}

// track records c, to be closed by Close, and reports whether the link is
// still open; when it is not, it closes c.
func (l *SlowLink) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		c.Close()
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

// drop closes c and forgets it.
func (l *SlowLink) drop(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
	c.Close()
}

// accept runs until the listener fails, which it does when Close closes it
// (or when the process is out of file descriptors, which ends the link's
// accepting too).
func (l *SlowLink) accept() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		if !l.track(c) {
			return
		}
		l.wg.Add(1)
		go l.serve(c)
	}
}

// serve forwards client to a new connection to the target, the uplink on
// this goroutine and the downlink on another, until both have ended, and
// closes both connections. A target that cannot be reached closes client.
func (l *SlowLink) serve(client net.Conn) {
	defer l.wg.Done()
	defer l.drop(client)
	var d net.Dialer
	server, err := d.DialContext(l.ctx, "tcp", l.target)
	if err != nil || !l.track(server) {
		return // (track closed server)
	}
	defer l.drop(server)
	down := make(chan struct{})
	go func() {
		defer close(down)
		l.pipe(client, server, l.down)
	}()
	l.pipe(server, client, l.up)
	<-down
}

// slowLinkSlack is how far ahead of its rate a link may run after a pause:
// see SlowLink.
const slowLinkSlack = 10 * time.Millisecond

// slowLinkMaxChunk bounds a chunk, and so the link's buffer per direction
// of a connection, at high rates, where 10 ms of the link would be more.
const slowLinkMaxChunk = 16 << 10

// chunkSize is how much the link reads from a side at a time at rate bytes
// per second: 10 ms of the link, at least 1 byte and at most
// slowLinkMaxChunk; at rate 0 (unthrottled), slowLinkMaxChunk.
func chunkSize(rate int) int {
	if rate == 0 {
		return slowLinkMaxChunk
	}
	return max(1, min(slowLinkMaxChunk, rate/100))
}

// pipe copies src to dst at rate bytes per second (0: as fast as they go)
// until src ends. At src's end of data (EOF: its peer closed its side for
// writing) it closes dst for writing, carrying the half-close over; on
// any other error, a failed write or Close, it closes both, which also ends
// the pipe of the other direction.
func (l *SlowLink) pipe(dst, src net.Conn, rate int) {
	buf := make([]byte, chunkSize(rate))
	p := pacer{rate: rate}
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
			if !p.wait(l.ctx, n) {
				break // closed
			}
		}
		if errors.Is(err, io.EOF) {
			closeWrite(dst)
			return
		}
		if err != nil {
			break
		}
	}
	src.Close()
	dst.Close()
}

// closeWrite shuts down c's writing side, or closes it when it has none.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		if cw.CloseWrite() != nil {
			c.Close() // the peer is gone already: nothing left to pass on
		}
		return
	}
	c.Close()
}

// pacer spaces one direction's chunks at its rate: a token bucket that
// holds at most slowLinkSlack of the link's credit. Used by one goroutine.
type pacer struct {
	rate int       // bytes per second; 0 for no pacing
	due  time.Time // when the link will have carried every byte forwarded so far
}

// wait returns once the link would have carried n more bytes, or false
// when ctx ends first.
func (p *pacer) wait(ctx context.Context, n int) bool {
	if p.rate == 0 {
		return true
	}
	now := time.Now()
	p.due = later(p.due, now.Add(-slowLinkSlack)).Add(time.Duration(n) * time.Second / time.Duration(p.rate))
	d := p.due.Sub(now)
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
