package demo

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/MrVSiK/gotry/telemetry"
)

// logRing keeps the last lines the view shows, each with a sequence number
// so the plain view prints every line once. Safe for concurrent use.
type logRing struct {
	mu    sync.Mutex // guards everything below
	lines []logLine  // ring of len cap
	seq   int64      // lines written so far
	// shown and dropped rate-limit lines by level and message: one a second,
	// counting the rest.
	shown   map[string]time.Time
	dropped map[string]int
}

type logLine struct {
	seq  int64
	text string
}

func newLogRing(n int) *logRing {
	return &logRing{lines: make([]logLine, n), shown: map[string]time.Time{}, dropped: map[string]int{}}
}

func (r *logRing) add(text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addLocked(text)
}

func (r *logRing) addLocked(text string) {
	r.seq++
	r.lines[int(r.seq)%len(r.lines)] = logLine{seq: r.seq, text: text}
}

// admit reports whether a line of kind key at now may be shown (one per
// second per kind) and how many like it were held back since the last one.
func (r *logRing) admit(key string, now time.Time) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if last, ok := r.shown[key]; ok && now.Sub(last) < time.Second {
		r.dropped[key]++
		return 0, false
	}
	n := r.dropped[key]
	r.shown[key], r.dropped[key] = now, 0
	return n, true
}

// since returns the kept lines with a sequence number above after, oldest
// first, and the last sequence number.
func (r *logRing) since(after int64) ([]string, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for s := max(after+1, r.seq-int64(len(r.lines))+1); s <= r.seq; s++ {
		out = append(out, r.lines[int(s)%len(r.lines)].text)
	}
	return out, r.seq
}

// last returns up to n of the most recent lines, oldest first.
func (r *logRing) last(n int) []string {
	r.mu.Lock()
	seq := r.seq
	r.mu.Unlock()
	lines, _ := r.since(max(seq-int64(n), 0))
	return lines
}

// ringCore is a zapcore.Core writing compact one-line entries to a logRing:
// "15:04:05.000 ERROR circuit breaker state changed server.address=payments
// ...". It keeps only what the view is about: warnings and errors (give-ups,
// budget exhaustion, breaker opening) and breaker moves. Every breaker move is
// shown; other lines at most once a second per level and message, with a
// count of the ones held back. Fields equal to zero are left out and the
// "gotry." prefix of keys is dropped.
type ringCore struct {
	ring   *logRing
	fields []zapcore.Field
}

var _ zapcore.Core = ringCore{}

func (c ringCore) Enabled(l zapcore.Level) bool { return l >= zapcore.InfoLevel }

func (c ringCore) With(fs []zapcore.Field) zapcore.Core {
	return ringCore{ring: c.ring, fields: append(append([]zapcore.Field(nil), c.fields...), fs...)}
}

func (c ringCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Level >= zapcore.WarnLevel || e.Message == telemetry.MsgBreakerState {
		return ce.AddCore(e, c)
	}
	return ce
}

// skipKeys are fields too long or too repetitive for the view.
var skipKeys = map[string]bool{"trace_id": true, "span_id": true, "http.request.method": true, "server.port": true}

func (c ringCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	held := 0
	if e.Message != telemetry.MsgBreakerState {
		n, ok := c.ring.admit(e.Level.String()+e.Message, e.Time)
		if !ok {
			return nil
		}
		held = n
	}
	var b strings.Builder
	b.WriteString(e.Time.Format("15:04:05.000"))
	fmt.Fprintf(&b, " %-5s %s", e.Level.CapitalString(), strings.TrimPrefix(e.Message, "gotry: "))
	for _, f := range append(c.fields[:len(c.fields):len(c.fields)], fs...) {
		enc := zapcore.NewMapObjectEncoder()
		f.AddTo(enc)
		for k, v := range enc.Fields {
			if skipKeys[k] || isZero(v) {
				continue
			}
			if f, ok := v.(float64); ok && secondsKeys[k] {
				v = secs(f)
			}
			fmt.Fprintf(&b, " %s=%s", strings.TrimPrefix(k, "gotry."), fmtValue(v))
		}
	}
	if held > 0 {
		fmt.Fprintf(&b, " (+%d like it)", held)
	}
	c.ring.add(b.String())
	return nil
}

// secondsKeys are the float fields that hold seconds.
var secondsKeys = map[string]bool{
	string(keyRequestDuration): true, string(keyAttemptDuration): true,
	string(keyBackoffTotal): true, string(keyBackoffDelay): true,
}

func isZero(v any) bool {
	switch x := v.(type) {
	case int64:
		return x == 0
	case float64:
		return x == 0
	case bool:
		return !x
	}
	return false
}

func (c ringCore) Sync() error { return nil }

func fmtValue(v any) string {
	switch x := v.(type) {
	case float64:
		return strconv.FormatFloat(x, 'g', 3, 64)
	case time.Duration:
		return fmtDur(x)
	case string:
		if strings.ContainsAny(x, " \t") {
			return strconv.Quote(x)
		}
		return x
	}
	return fmt.Sprint(v)
}
