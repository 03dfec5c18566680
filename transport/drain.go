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
// The rate is measured late in the upload, between two marks: the marks are
// reads, the newer one taken at the first read at least twice as far from
// the start as the newer mark was (the older mark being the newer one's
// predecessor). At the end the newer mark is past the middle of the upload
// and the older one at most half as far in, so the rate is measured over at
// least the last quarter of the upload's time, after the burst at its
// start. Measuring between two reads rather than up to the write matters:
// once the buffers are full a socket takes bytes in steps (on Linux it wakes
// a blocked writer when a third of its buffer is free, so a step is a
// megabyte or more, every second or so over a slow link), and the write
// comes at an arbitrary point of a step; a mark, taken at the first read
// after a given time, falls at the start of a step (a step's reads take
// microseconds, its wait the rest), so two marks are in the same phase of
// the staircase and their rate is the link's.
//
// The extension is never more than the upload itself took: the estimate is
// wrong when something else shaped the reads (a body source that slowed
// down late), and then it costs a silent server's detection at most the
// upload's time again. An upload whose body the buffers took at once (a
// small body, or any body over loopback) has no extension: its reads say
// nothing about the link.

// uploadMeter watches one request body's reads. The zero value is ready.
// Not safe for concurrent use: its headerTimer guards it.
type uploadMeter struct {
	started bool
	start   time.Time  // the first read
	sent    int64      // bytes read so far
	older   uploadMark // the marks the rate is measured between (see above)
	newer   uploadMark
}

// uploadMark is one read: when it started, and how many bytes were read
// before it (the bytes the socket had taken by then).
type uploadMark struct {
	at   time.Duration // since the first read
	sent int64
}

// uploadMarkSpacing: the newer mark moves to the first read at least this
// many times as far from the start as it is. Two keeps the window between
// the marks at least a quarter of the upload's time, and its start past the
// first quarter of it (past the burst, in any upload of more than a few
// steps), with two marks whatever the upload's length. A larger spacing
// would measure over a longer window that starts sooner, nearer the burst.
const uploadMarkSpacing = 2

// read records a read that started at now and got n bytes.
func (m *uploadMeter) read(now time.Time, n int) {
	if !m.started {
		m.started, m.start = true, now
	}
	if at := now.Sub(m.start); at > 0 && at >= uploadMarkSpacing*m.newer.at {
		m.older, m.newer = m.newer, uploadMark{at: at, sent: m.sent}
	}
	m.sent += int64(n)
}

// drain returns how long after wrote, when the request's write ended, the
// bytes read may still take to reach the server: the extension of the
// header timeout (see above), between zero and the upload's own time.
func (m *uploadMeter) drain(wrote time.Time) time.Duration {
	took := wrote.Sub(m.start)
	dt, dn := m.newer.at-m.older.at, m.newer.sent-m.older.sent
	if !m.started || took <= 0 || dt <= 0 || dn <= 0 {
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
