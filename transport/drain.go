package transport

import (
	"io"
	"time"
)

// The header timeout's drain estimate: how long after the request's write
// (httptrace's WroteRequest) the server may still be receiving it, from the
// times its body was read.
//
// WroteRequest fires when the body's last byte has entered the client's
// socket, not when the server has it. Over a slow link the bytes between
// the two (the socket's send buffer, the network's queues, the receiver's
// buffer) can take seconds to arrive: on Linux an upload first fills
// megabytes of buffers at memory speed, then the socket takes bytes only as
// fast as the link drains them. A header timeout started at the write would
// run out while the server is still receiving.
//
// The body's reads show the drain: http.Transport reads the body as it
// writes it, so once the buffers are full each read waits for the socket to
// take the previous one, and bytes are read at the rate the link carries
// them. If the upload started at start and the link has carried rate bytes
// per second since, then at the write, when sent bytes have been read, the
// bytes still queued are sent − rate·(write − start), and they drain in
//
//	sent/rate − (write − start)
//
// which is the extension the header timeout adds. It is zero when the reads
// kept the link's pace from the start (the buffers held nothing back: a
// slow source, a fast link) and grows with the burst that filled the
// buffers.
//
// The rate is measured between two reads that each came after a wait for
// the link: the first such read and the latest. Measuring between such
// reads rather than over any span matters: once the buffers are full a
// socket takes bytes in steps (on Linux it wakes a blocked writer when a
// third of its send buffer is free: a step is a megabyte or more, about a
// second apart over a slow link, and its reads come microseconds apart), so
// a span that starts or ends within a step counts its bytes as carried by
// the link when they were only queued; the write, in particular, ends at an
// arbitrary point of the last step. Two reads that each start a step are in
// the same phase of the staircase, and the rate between them is the link's,
// averaged over every step since the burst. Over a link that takes bytes
// smoothly nearly every read follows a "wait", and any two give its rate.
//
// The extension is never more than the upload itself took: the estimate is
// wrong when something else shaped the reads (a body source that slowed
// down late), and then it costs a silent server's detection at most the
// upload's time again. When the reads show no wait for the link (the
// buffers took the whole body at once: a small body, or any body over
// loopback) or no bytes between two waits, there is no extension: the
// reads say nothing about the link. A stall (a wait more than uploadWait
// times as long as any before it) restarts the count, so that the burst's
// reads are left behind; if the link's steps after it wait less than
// 1/uploadWait as long, the upload ends with no rate, and no extension.

// uploadWait: a read follows a wait for the link when the time since the
// read before it is at least 1/uploadWait of the longest such time so far,
// and a time more than uploadWait times the longest so far starts the count
// of waits afresh. The steps of one link wait about as long as each other,
// while the reads within a step or within the burst that fills the buffers
// are microseconds apart, and a scheduler's pause within a step lasts tens
// of milliseconds against the hundreds a slow link's step waits: a factor
// of two keeps the steps and leaves out the rest. Measured in 33 uploads of
// 8 MiB through a 2,000 KB/s proxy, with -race, on a 2-core machine at a
// load of about 13: an upload's longest wait was at most 1.72 times its
// shortest (0.6 s or more), and the longest pause that was not a wait
// 0.12 s.
const uploadWait = 2

// uploadMeter watches one request body's reads. The zero value is ready.
// Not safe for concurrent use: its headerTimer guards it.
type uploadMeter struct {
	started bool
	start   time.Time     // the first read
	prev    time.Time     // the latest read
	sent    int64         // bytes read so far
	longest time.Duration // the longest time between two reads so far
	// first and last are the first and the latest read after a wait for
	// the link (see uploadWait); first.at is 0 until there is one.
	first, last uploadMark
}

// uploadMark is a read that followed a wait: when it started, and how many
// bytes were read before it (the bytes the socket had taken by then).
type uploadMark struct {
	at   time.Duration // since the first read
	sent int64
}

// read records a read that started at now and got n bytes.
func (m *uploadMeter) read(now time.Time, n int) {
	if m.started {
		wait := now.Sub(m.prev)
		mark := uploadMark{at: now.Sub(m.start), sent: m.sent}
		if wait > uploadWait*m.longest {
			m.first = mark // (wait > 0: first.at > 0)
		}
		if uploadWait*wait >= m.longest {
			m.last = mark
		}
		m.longest = max(m.longest, wait)
	} else {
		m.started, m.start = true, now
	}
	m.prev = now
	m.sent += int64(n)
}

// drain returns how long after wrote, when the request's write ended, the
// bytes read may still take to reach the server: the extension of the
// header timeout (see above), between zero and the upload's own time.
func (m *uploadMeter) drain(wrote time.Time) time.Duration {
	took := wrote.Sub(m.start)
	dt, dn := m.last.at-m.first.at, m.last.sent-m.first.sent
	if !m.started || m.first.at == 0 || took <= 0 || dt <= 0 || dn <= 0 {
		return 0 // no rate was measured: nothing to extend by
	}
	need := float64(m.sent) * float64(dt) / float64(dn) // sent/rate, in nanoseconds
	switch ext := need - float64(took); {
	case ext <= 0:
		return 0
	case ext >= float64(took):
		return took
	default:
		return time.Duration(ext)
	}
}

// meteredBody is an attempt's request body, whose reads its header timer's
// meter records.
type meteredBody struct {
	rc io.ReadCloser
	h  *headerTimer
}

func (b *meteredBody) Read(p []byte) (int, error) {
	now := b.h.clock.Now()
	n, err := b.rc.Read(p)
	b.h.mu.Lock()
	b.h.meter.read(now, n)
	b.h.mu.Unlock()
	return n, err
}

func (b *meteredBody) Close() error { return b.rc.Close() }
