package demo

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/MrVSiK/gotry/resilience"
)

// ANSI sequences of the live view.
const (
	ansiHome      = "\x1b[H"
	ansiClearEOL  = "\x1b[K"
	ansiClearDown = "\x1b[J"
	ansiHide      = "\x1b[?25l"
	ansiShow      = "\x1b[?25h"
	ansiReset     = "\x1b[0m"
	ansiBold      = "\x1b[1m"
	ansiDim       = "\x1b[2m"
	ansiRed       = "\x1b[31m"
	ansiGreen     = "\x1b[32m"
	ansiYellow    = "\x1b[33m"
)

// sample is what the view shows at one tick.
type sample struct {
	now       time.Time
	elapsed   time.Duration
	c         Counters
	tokens    float64 // +Inf when the budget is off
	p50, p99  time.Duration
	breakers  []BreakerRow
	served    [numFaults]int64
	outageNow bool
	limits    []LimitRow // the hosts under the concurrency limit
	// prevLimits are limits of the sample rates are taken against (set by
	// draw), for the per-second sheds and goodput.
	prevLimits []LimitRow
}

// view renders samples: a full-screen ANSI frame redrawn in place (live), or
// one line per tick plus new log lines and periodic waterfalls (plain). It is
// used from one goroutine only.
type view struct {
	out      io.Writer
	live     bool
	width    int
	height   int      // terminal rows; 0: unknown
	header   []string // fixed lines: configuration and endpoints
	outage   Outage
	duration time.Duration
	logs     *logRing

	// prev and prev2 are the last two samples drawn: rates are taken
	// against prev, or prev2 when prev is too recent to give a rate.
	prev, prev2     Counters
	prevAt, prev2At time.Time
	prevL, prev2L   []LimitRow
	logSeq          int64    // last log line printed (plain)
	wf              []string // current waterfall (live)
	wfTitle         string
	started         bool
	final           bool // traffic has stopped: the last frame
	stopping        bool // no new requests; the ones in flight are finishing
}

// rate returns the per-second rate of a counter between two samples.
func rate(cur, prev int64, dt time.Duration) float64 {
	if dt <= 0 {
		return 0
	}
	return float64(cur-prev) / dt.Seconds()
}

// minRateSpan is the shortest span a rate is computed over; the final
// sample, taken right after the last tick, falls back to the one before.
const minRateSpan = 500 * time.Millisecond

// draw renders s.
func (v *view) draw(s sample) {
	base, at, baseL := v.prev, v.prevAt, v.prevL
	if s.now.Sub(at) < minRateSpan && !v.prev2At.IsZero() {
		base, at, baseL = v.prev2, v.prev2At, v.prev2L
	}
	s.prevLimits = baseL
	dt := s.now.Sub(at)
	if at.IsZero() {
		dt = 0
	}
	if v.live {
		v.drawLive(s, base, dt)
	} else {
		v.drawPlain(s, base, dt)
	}
	v.prev2, v.prev2At, v.prev2L = v.prev, v.prevAt, v.prevL
	v.prev, v.prevAt, v.prevL = s.c, s.now, s.limits
}

// setWaterfall installs a new waterfall: shown in the live frame, printed
// as a block in plain mode.
func (v *view) setWaterfall(title string, lines []string) {
	if v.live {
		v.wfTitle, v.wf = title, lines
		return
	}
	fmt.Fprintln(v.out, title)
	for _, l := range lines {
		fmt.Fprintln(v.out, l)
	}
}

func (v *view) drawPlain(s sample, p Counters, dt time.Duration) {
	c := s.c
	var b strings.Builder
	fmt.Fprintf(&b, "[%5s] req %5.1f/s (%d) · att %5.1f/s · retry %4.1f/s · hedge %4.1f/s won %4.1f/s · give-up %4.1f/s (%d)",
		fmtElapsed(s.elapsed), rate(c.Requests, p.Requests, dt), c.Requests, rate(c.Attempts, p.Attempts, dt),
		rate(c.Retries, p.Retries, dt), rate(c.Hedges, p.Hedges, dt), rate(c.HedgeWins, p.HedgeWins, dt),
		rate(c.giveUps(), p.giveUps(), dt), c.giveUps())
	fmt.Fprintf(&b, " · budget %s · p50 %s p99 %s ·", fmtTokens(s.tokens), fmtDur(s.p50), fmtDur(s.p99))
	for i, br := range s.breakers {
		sep := ","
		if i == len(s.breakers)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, " %s %s %s%s", br.Host, stateWord(br.State), fmtElapsed(br.Since), sep)
	}
	for _, l := range s.limits {
		shed, ok := limitRates(l, s.prevLimits, dt)
		drop := ""
		if l.DropNow {
			drop = " DROP"
		}
		fmt.Fprintf(&b, " · limit %s %d/%d shed %.1f/s ok %.1f/s%s", l.Host, l.InFlight, l.Limit, shed, ok, drop)
	}
	fmt.Fprintln(v.out, b.String())
	lines, seq := v.logs.since(v.logSeq)
	v.logSeq = seq
	for _, l := range lines {
		fmt.Fprintln(v.out, "        log "+l)
	}
}

func (v *view) drawLive(s sample, p Counters, dt time.Duration) {
	c := s.c
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	lines = append(lines, v.header...)
	progress := fmtElapsed(s.elapsed)
	switch {
	case v.final:
		progress = "finished after " + progress
	case v.stopping:
		progress += " · stopping, waiting for requests in flight"
	case v.duration > 0:
		progress += " / " + fmtElapsed(v.duration)
	}
	lines[0] = ansiBold + lines[0] + ansiReset + "   " + progress
	add("")
	add("%s%-20s %10s %9s%s", ansiDim, "", "total", "per sec", ansiReset)
	perReq := 0.0
	if c.Requests > 0 {
		perReq = float64(c.Attempts) / float64(c.Requests)
	}
	add("%-20s %10d %9.1f   p50 %s · p99 %s (last %ds)", "requests", c.Requests, rate(c.Requests, p.Requests, dt), fmtDur(s.p50), fmtDur(s.p99), windowSecs)
	add("%-20s %10d %9.1f   %.2f per request · per-attempt timeouts %d", "attempts", c.Attempts, rate(c.Attempts, p.Attempts, dt), perReq, c.Timeouts)
	add("%-20s %10d %9.1f   after Retry-After %d", "retries", c.Retries, rate(c.Retries, p.Retries, dt), c.RetryAfter)
	wins := ""
	if c.Hedges > 0 {
		wins = fmt.Sprintf("   won %d (%.0f%%)", c.HedgeWins, 100*float64(c.HedgeWins)/float64(c.Hedges))
	}
	add("%-20s %10d %9.1f%s", "hedges", c.Hedges, rate(c.Hedges, p.Hedges, dt), wins)
	add("%-20s %10d %9.1f   %s", "give-ups", c.giveUps(), rate(c.giveUps(), p.giveUps(), dt), reasons(c.Reasons))
	add("%-20s %10d %9.1f", "breaker rejections", c.BreakerRejects, rate(c.BreakerRejects, p.BreakerRejects, dt))
	add("%-20s %10s %9s   refusals %d", "budget tokens", fmtTokens(s.tokens), "", c.BudgetRefusals)
	if c.Skipped > 0 {
		add("%-20s %10d %9.1f   every worker was busy", "skipped", c.Skipped, rate(c.Skipped, p.Skipped, dt))
	}
	add("")
	for i, br := range s.breakers {
		label := ""
		if i == 0 {
			label = "breakers"
		}
		extra := ""
		if br.Opens > 0 {
			extra = fmt.Sprintf("opened %d× · closed %d×", br.Opens, br.Closes)
		}
		if br.Host == v.outage.Host && s.outageNow {
			extra += ansiRed + "   outage now" + ansiReset
		}
		add("%-10s %-12s %s %8s   %s", label, br.Host, colorState(br.State), fmtElapsed(br.Since), extra)
	}
	for i, l := range s.limits {
		label := ""
		if i == 0 {
			label = "limit"
		}
		shed, ok := limitRates(l, s.prevLimits, dt)
		extra := ""
		if l.DropNow {
			extra = ansiYellow + "   capacity drop now" + ansiReset
		}
		add("%-10s %-12s limit %4d · in flight %4d · shed %6.1f/s (%d) · answered ok %6.1f/s%s",
			label, l.Host, l.Limit, l.InFlight, shed, l.Shed, ok, extra)
	}
	if len(s.limits) > 0 {
		add("%-10s %-12s shed initial %d · retry %d · hedge %d · waited for a permit %d", "", "", c.ShedInitial, c.ShedRetry, c.ShedHedge, c.LimitWaits)
	}
	add("")
	add("upstream   %s", servedLine(s.served))
	add("")
	add("%srecent log lines (warnings, errors, breaker moves)%s", ansiDim, ansiReset)
	for _, l := range padLines(v.logs.last(6), 6) {
		add("  %s", v.clip(l, 2))
	}
	if v.wfTitle != "" {
		add("")
		add("%s%s%s", ansiDim, v.wfTitle, ansiReset)
		for _, l := range v.wf {
			add("%s", v.clip(l, 0))
		}
	}

	for i, l := range lines {
		if !strings.Contains(l, "\x1b") { // colored lines are short
			lines[i] = v.clip(l, 0)
		}
	}
	if v.height > 2 && len(lines) > v.height-1 {
		lines = lines[:v.height-1] // the end of the waterfall goes first
	}
	var b strings.Builder
	if !v.started {
		b.WriteString(ansiHide + "\x1b[2J")
		v.started = true
	}
	b.WriteString(ansiHome)
	for _, l := range lines {
		b.WriteString(l + ansiClearEOL + "\n")
	}
	b.WriteString(ansiClearDown)
	_, _ = io.WriteString(v.out, b.String()) // best effort, like fmt.Fprint
}

// limitRates returns l's sheds and requests answered ok per second since the
// row of the same host in prev.
func limitRates(l LimitRow, prev []LimitRow, dt time.Duration) (shed, ok float64) {
	for _, p := range prev {
		if p.Host == l.Host {
			return rate(l.Shed, p.Shed, dt), rate(l.OK, p.OK, dt)
		}
	}
	return 0, 0
}

// stop notes that traffic has stopped and the requests in flight are
// finishing (which takes up to a Retry-After or a per-attempt timeout).
func (v *view) stop() {
	v.stopping = true
	if !v.live {
		fmt.Fprintln(v.out, "stopping: no new requests; waiting for the ones in flight")
	}
}

// close restores the cursor after a live view.
func (v *view) close() {
	if v.live && v.started {
		_, _ = io.WriteString(v.out, ansiShow)
	}
}

// clip shortens l to the width, indent included.
func (v *view) clip(l string, indent int) string {
	r := []rune(l)
	if w := v.width - indent; w > 1 && len(r) > w {
		return string(r[:w-1]) + "…"
	}
	return l
}

func padLines(ls []string, n int) []string {
	for len(ls) < n {
		ls = append(ls, "")
	}
	return ls
}

func stateWord(s resilience.BreakerState) string {
	if s == resilience.BreakerOpen {
		return "OPEN"
	}
	return s.String()
}

func colorState(s resilience.BreakerState) string {
	w := fmt.Sprintf("%-10s", stateWord(s))
	switch s {
	case resilience.BreakerOpen:
		return ansiRed + ansiBold + w + ansiReset
	case resilience.BreakerHalfOpen:
		return ansiYellow + w + ansiReset
	}
	return ansiGreen + w + ansiReset
}

// reasons prints give-up counts, largest first.
func reasons(m map[string]int64) string {
	type kv struct {
		k string
		v int64
	}
	var kvs []kv
	for k, v := range m {
		kvs = append(kvs, kv{k, v})
	}
	sort.Slice(kvs, func(i, j int) bool { return kvs[i].v > kvs[j].v || (kvs[i].v == kvs[j].v && kvs[i].k < kvs[j].k) })
	var parts []string
	for _, x := range kvs {
		parts = append(parts, fmt.Sprintf("%s %d", x.k, x.v))
	}
	return strings.Join(parts, " · ")
}

// servedLine summarises what the upstream answered.
func servedLine(s [numFaults]int64) string {
	var total int64
	var parts []string
	for f := fault(0); f < numFaults; f++ {
		total += s[f]
		if s[f] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", f, s[f]))
		}
	}
	return fmt.Sprintf("%d answered: %s", total, strings.Join(parts, " · "))
}

func fmtTokens(t float64) string {
	if t > 1e12 {
		return "off"
	}
	return fmt.Sprintf("%.1f", t)
}

// fmtElapsed prints 7s, 1m05s, 1h02m.
func fmtElapsed(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", d/time.Second)
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", d/time.Minute, (d%time.Minute)/time.Second)
	}
	return fmt.Sprintf("%dh%02dm", d/time.Hour, (d%time.Hour)/time.Minute)
}
