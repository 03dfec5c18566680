package transporttest_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/MrVSiK/gotry/transport/transporttest"
)

// tcpServer serves raw TCP on loopback, each connection with handle on a
// goroutine of its own; it closes the connections and waits for handle
// when the test ends.
func tcpServer(t *testing.T, handle func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { handle(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// dial connects to addr with a deadline, so a broken link fails the test
// instead of hanging it.
func dial(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	return c.(*net.TCPConn)
}

// Each direction carries at its own rate, and an unthrottled one at
// loopback's. The client sends size bytes and closes its side for writing;
// the server reads them to that end (so the half-close crosses the link),
// then sends size bytes back and closes. Up is timed from the client's
// first write to the server's end of data, down from the server's first
// write to the client's. A throttled direction takes at least 0.98 s for
// 1 MiB at 1 MiB/s (the pacing's bound: a chunk and 10 ms of credit ahead
// of the rate); the upper bounds are wide for a loaded 2-core machine
// running the race detector.
func TestSlowLinkCarriesEachDirectionAtItsRate(t *testing.T) {
	const size, rate = 1 << 20, 1 << 20
	cases := []struct {
		name             string
		up, down         int
		upMin, upMax     time.Duration
		downMin, downMax time.Duration
	}{
		{"up throttled", rate, 0, 900 * time.Millisecond, 3 * time.Second, 0, time.Second},
		{"down throttled", 0, rate, 0, time.Second, 900 * time.Millisecond, 3 * time.Second},
		{"both throttled", rate, rate, 900 * time.Millisecond, 3 * time.Second, 900 * time.Millisecond, 3 * time.Second},
		{"unthrottled", 0, 0, 0, time.Second, 0, time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			type mark struct {
				n  int64
				at time.Time
			}
			upEnd, downStart := make(chan mark, 1), make(chan time.Time, 1)
			addr := tcpServer(t, func(c net.Conn) {
				defer c.Close()
				n, _ := io.Copy(io.Discard, c)
				upEnd <- mark{n, time.Now()}
				downStart <- time.Now()
				c.Write(make([]byte, size))
			})
			link := transporttest.StartSlowLink(t, addr, tc.up, tc.down)
			c := dial(t, link.Addr())

			start := time.Now()
			if _, err := c.Write(make([]byte, size)); err != nil {
				t.Fatal(err)
			}
			if err := c.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			got, err := io.Copy(io.Discard, c)
			downEnd := time.Now()
			if err != nil {
				t.Fatalf("reading the answer: %v after %d bytes", err, got)
			}
			sent := <-upEnd
			up, down := sent.at.Sub(start), downEnd.Sub(<-downStart)
			t.Logf("up %v, down %v", up.Round(time.Millisecond), down.Round(time.Millisecond))
			if sent.n != size || got != size {
				t.Fatalf("the server got %d bytes and the client %d, want %d each", sent.n, got, size)
			}
			if up < tc.upMin || up > tc.upMax {
				t.Errorf("up took %v, want %v to %v", up.Round(time.Millisecond), tc.upMin, tc.upMax)
			}
			if down < tc.downMin || down > tc.downMax {
				t.Errorf("down took %v, want %v to %v", down.Round(time.Millisecond), tc.downMin, tc.downMax)
			}
		})
	}
}

// Close ends a connection in the middle of a pacing wait and an idle one,
// on both sides, at once, and leaves no goroutine behind; the link then
// refuses connections, and a second Close is harmless.
func TestSlowLinkCloseReleasesEverything(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // after every other cleanup

	firstByte, ended := make(chan struct{}, 2), make(chan struct{}, 2)
	addr := tcpServer(t, func(c net.Conn) {
		defer func() { ended <- struct{}{} }()
		if _, err := c.Read(make([]byte, 1)); err == nil {
			firstByte <- struct{}{}
		}
		io.Copy(io.Discard, c)
	})
	// One byte a second: after the first byte the link waits a second
	// before it reads the next.
	link, err := transporttest.NewSlowLink(addr, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	busy, idle := dial(t, link.Addr()), dial(t, link.Addr())
	if _, err := busy.Write(bytes.Repeat([]byte("x"), 100)); err != nil {
		t.Fatal(err)
	}
	<-firstByte // the link is in its wait

	start := time.Now()
	link.Close()
	took := time.Since(start)
	t.Logf("Close took %v", took)
	if took > 500*time.Millisecond {
		t.Errorf("Close took %v: it waited out the pacing instead of ending it", took)
	}
	for _, c := range []net.Conn{busy, idle} {
		if n, err := c.Read(make([]byte, 1)); err == nil {
			t.Errorf("a client's connection still reads (%d bytes) after Close", n)
		}
	}
	for range 2 {
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			t.Fatal("a server's connection is still open 10s after Close")
		}
	}
	if c, err := net.Dial("tcp", link.Addr()); err == nil {
		c.Close()
		t.Error("the link accepts connections after Close")
	}
	link.Close()
}

// A client whose connection the link cannot carry on, because nothing
// listens at the target, sees its connection closed.
func TestSlowLinkClosesAConnectionItCannotForward(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := ln.Addr().String()
	ln.Close() // nothing listens there now: every dial is refused
	link := transporttest.StartSlowLink(t, target, 0, 0)
	c := dial(t, link.Addr())
	if n, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("read %d bytes, error %v; want io.EOF", n, err)
	}
}

func TestNewSlowLinkRefusesBadArguments(t *testing.T) {
	cases := []struct {
		name     string
		target   string
		up, down int
	}{
		{"a negative up rate", "127.0.0.1:80", -1, 0},
		{"a negative down rate", "127.0.0.1:80", 0, -1},
		{"a URL for the target", "http://127.0.0.1:80", 0, 0},
		{"a target without a port", "127.0.0.1", 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			link, err := transporttest.NewSlowLink(tc.target, tc.up, tc.down)
			if err == nil {
				link.Close()
				t.Fatal("no error")
			}
			t.Log(err)
		})
	}
}
