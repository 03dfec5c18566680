package transport_test

import (
	"net"
	"sync"
	"testing"
	"time"
)

// slowLink is a TCP proxy on loopback whose uplink (client to server) runs
// at rate bytes per second and whose downlink is not throttled: a slow link
// on the socket, not before it. It paces its reads from the client's
// connection in small chunks, so the client's send buffer and the proxy's
// receive buffer fill as a real link's queues do, and the client's writes
// (and reads of its request body) go at the link's rate once they are full.
type slowLink struct {
	ln     net.Listener
	target string // the server's address
	rate   int    // uplink bytes per second

	wg     sync.WaitGroup // the accept loop and every pipe
	mu     sync.Mutex
	conns  []net.Conn // every connection, closed by close; guarded by mu
	closed bool       // guarded by mu
}

// slowLinkChunk is how much the proxy reads from the client at a time: 16
// KiB is 8 ms of a 2,000 KB/s link, well above time.Sleep's granularity and
// far below the buffers a burst fills (megabytes).
const slowLinkChunk = 16 << 10

// newSlowLink starts a proxy to target, closed when the test ends.
func newSlowLink(t *testing.T, target string, rate int) *slowLink {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &slowLink{ln: ln, target: target, rate: rate}
	l.wg.Add(1)
	go l.accept()
	t.Cleanup(l.close)
	return l
}

// URL is the proxy's address as an http URL.
func (l *slowLink) URL() string { return "http://" + l.ln.Addr().String() }

func (l *slowLink) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		c.Close()
		return false
	}
	l.conns = append(l.conns, c)
	return true
}

func (l *slowLink) accept() {
	defer l.wg.Done()
	for {
		client, err := l.ln.Accept()
		if err != nil {
			return // closed
		}
		if !l.track(client) {
			return
		}
		server, err := net.Dial("tcp", l.target)
		if err != nil {
			client.Close()
			continue
		}
		if !l.track(server) {
			client.Close()
			return
		}
		l.wg.Add(2)
		go l.pipe(server, client, l.rate)
		go l.pipe(client, server, 0)
	}
}

// pipe copies src to dst, at rate bytes per second (0: unthrottled), and
// closes both when either ends (an HTTP client never half-closes). The pacing is a token bucket with no
// credit saved while idle: each chunk forwarded pushes the time the next
// may be read by its size over the rate.
func (l *slowLink) pipe(dst, src net.Conn, rate int) {
	defer l.wg.Done()
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, slowLinkChunk)
	var due time.Time
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			if rate > 0 {
				due = later(due, time.Now()).Add(time.Duration(n) * time.Second / time.Duration(rate))
				time.Sleep(time.Until(due))
			}
		}
		if err != nil {
			return // the end of either side ends both
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// close stops the proxy and every connection, and waits for its goroutines.
func (l *slowLink) close() {
	l.ln.Close()
	l.mu.Lock()
	l.closed = true
	for _, c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
}
