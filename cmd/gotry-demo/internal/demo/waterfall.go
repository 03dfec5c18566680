package demo

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/MrVSiK/gotry/telemetry"
)

// Span event names the telemetry package puts on the request span. They are
// part of its trace output, so they are spelled out here.
const (
	eventRetry         = "gotry.retry"
	eventHedge         = "gotry.hedge"
	eventBudget        = "gotry.budget.exhausted"
	eventBreakerReject = "gotry.breaker.reject"
)

// waterfall layout: the label column and the default bar width.
const (
	labelWidth      = 46
	defaultBarWidth = 40
)

// node is a span in the tree with its children.
type node struct {
	s        sdktrace.ReadOnlySpan
	children []*node
}

// row is one line of the waterfall body: a span or an event.
type row struct {
	at, end time.Time     // end is zero for an event
	head    time.Duration // an attempt's time to headers; 0 if not an attempt
	prefix  string
	label   string
}

// renderWaterfall draws one trace as a text waterfall: a header naming the
// request and its result, then every span (and the request span's events)
// as a tree with its offset, duration and a bar on a common time axis. An
// attempt's bar is solid until its response headers and light while its span
// stays open after them (its body being read, or its response kept in case
// the request gives up). Spans need not be sorted; spans whose parent is
// missing become roots.
func renderWaterfall(tv traceView, barWidth int) []string {
	spans := tv.spans
	if len(spans) == 0 {
		return nil
	}
	if barWidth < 10 {
		barWidth = defaultBarWidth
	}
	byID := map[trace.SpanID]*node{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = &node{s: s}
	}
	var roots []*node
	start, end := spans[0].StartTime(), spans[0].EndTime()
	for _, s := range spans {
		n := byID[s.SpanContext().SpanID()]
		if p, ok := byID[s.Parent().SpanID()]; ok && s.Parent().IsValid() && p != n {
			p.children = append(p.children, n)
		} else {
			roots = append(roots, n)
		}
		if s.StartTime().Before(start) {
			start = s.StartTime()
		}
		if s.EndTime().After(end) {
			end = s.EndTime()
		}
	}
	total := end.Sub(start)
	if total <= 0 {
		total = time.Microsecond
	}
	sortNodes(roots)

	var rows []row
	var walk func(n *node, lead, branch string)
	walk = func(n *node, lead, branch string) {
		rows = append(rows, row{at: n.s.StartTime(), end: n.s.EndTime(), head: tv.heads[n.s.SpanContext().SpanID()],
			prefix: lead + branch, label: spanLabel(n.s)})
		child := lead
		switch branch {
		case "├─ ":
			child += "│  "
		case "└─ ":
			child += "   "
		}
		type item struct {
			at   time.Time
			n    *node
			ev   sdktrace.Event
			isEv bool
		}
		var items []item
		// Events first: at equal times an event (a retry scheduled) precedes
		// the span it causes (the backoff).
		for _, ev := range n.s.Events() {
			items = append(items, item{at: ev.Time, ev: ev, isEv: true})
		}
		sortNodes(n.children)
		for _, c := range n.children {
			items = append(items, item{at: c.s.StartTime(), n: c})
		}
		sort.SliceStable(items, func(i, j int) bool { return items[i].at.Before(items[j].at) })
		for i, it := range items {
			br := "├─ "
			if i == len(items)-1 {
				br = "└─ "
			}
			if it.isEv {
				rows = append(rows, row{at: it.at, prefix: child + br, label: eventLabel(it.ev)})
				continue
			}
			walk(it.n, child, br)
		}
	}
	for _, r := range roots {
		walk(r, "", "")
	}

	out := []string{header(spans, total)}
	axis := "0" + strings.Repeat(" ", max(barWidth-len(fmtDur(total))-1, 1)) + fmtDur(total)
	out = append(out, fmt.Sprintf("  %7s %7s  %-*s  %s", "offset", "dur", labelWidth, "span", axis))
	for _, r := range rows {
		label := r.prefix + r.label
		if n := len([]rune(label)); n > labelWidth {
			label = string([]rune(label)[:labelWidth-1]) + "…"
		} else {
			label += strings.Repeat(" ", labelWidth-n)
		}
		off := fmtDur(r.at.Sub(start))
		dur := ""
		switch {
		case r.head > 0:
			dur = fmtDur(r.head)
		case !r.end.IsZero():
			dur = fmtDur(r.end.Sub(r.at))
		}
		out = append(out, fmt.Sprintf("  %7s %7s  %s |%s|", off, dur, label, bar(r, start, total, barWidth)))
	}
	return append(out, fmt.Sprintf("  %s", "█ attempt until response headers · ░ span still open (body read, or response kept in case of give-up) · ◆ event"))
}

func sortNodes(ns []*node) {
	sort.SliceStable(ns, func(i, j int) bool { return ns[i].s.StartTime().Before(ns[j].s.StartTime()) })
}

// bar draws r on a width-column axis from start, total long: a span from its
// start to its end (solid up to r.head when set, light after), an event as a
// diamond.
func bar(r row, start time.Time, total time.Duration, width int) string {
	col := func(t time.Time) int {
		return int(math.Ceil(float64(t.Sub(start)) / float64(total) * float64(width)))
	}
	a := min(int(float64(r.at.Sub(start))/float64(total)*float64(width)), width-1)
	if r.end.IsZero() {
		return strings.Repeat(" ", a) + "◆" + strings.Repeat(" ", width-a-1)
	}
	b := min(max(col(r.end), a+1), width)
	h := b
	if r.head > 0 {
		h = min(max(col(r.at.Add(r.head)), a+1), b)
	}
	return strings.Repeat(" ", a) + strings.Repeat("█", h-a) + strings.Repeat("░", b-h) + strings.Repeat(" ", width-b)
}

// header summarises the request: method, URL, result, attempts, backoff,
// duration and the trace id to look it up in Jaeger.
func header(spans []sdktrace.ReadOnlySpan, total time.Duration) string {
	var req, att sdktrace.ReadOnlySpan
	for _, s := range spans {
		if _, ok := requestAttempts(s); ok && req == nil {
			req = s
		}
		if _, ok := attr(s, semconv.URLFullKey); ok && att == nil {
			att = s
		}
	}
	id := spans[0].SpanContext().TraceID().String()
	if req == nil {
		return fmt.Sprintf("trace %s  (%s)", id, fmtDur(total))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "trace %s  ", id)
	method, _ := attr(req, semconv.HTTPRequestMethodKey)
	b.WriteString(method.AsString())
	if att != nil {
		u, _ := attr(att, semconv.URLFullKey)
		b.WriteString(" " + u.AsString())
	} else if h, ok := attr(req, semconv.ServerAddressKey); ok {
		b.WriteString(" " + h.AsString())
	}
	b.WriteString(" → " + result(req))
	n := intAttr(req, telemetry.KeyAttempts)
	fmt.Fprintf(&b, " · %d attempt%s", n, plural(n))
	if r, h := intAttr(req, telemetry.KeyRetries), intAttr(req, telemetry.KeyHedges); r+h > 0 {
		retries := "retries"
		if r == 1 {
			retries = "retry"
		}
		fmt.Fprintf(&b, " (%d %s, %d hedge%s)", r, retries, h, plural(h))
	}
	if v, ok := attr(req, keyBackoffTotal); ok && v.AsFloat64() > 0 {
		fmt.Fprintf(&b, " · backoff %s", fmtDur(secs(v.AsFloat64())))
	}
	fmt.Fprintf(&b, " · %s", fmtDur(req.EndTime().Sub(req.StartTime())))
	return b.String()
}

// result is "200 success", "503 attempts_exhausted", "timeout
// attempts_exhausted", ...
func result(s sdktrace.ReadOnlySpan) string {
	var parts []string
	if c := intAttr(s, semconv.HTTPResponseStatusCodeKey); c > 0 {
		parts = append(parts, fmt.Sprint(c))
	} else if et, ok := attr(s, semconv.ErrorTypeKey); ok {
		parts = append(parts, et.AsString())
	}
	if r, ok := attr(s, telemetry.KeyReason); ok {
		parts = append(parts, r.AsString())
	}
	if o, ok := attr(s, telemetry.KeyAttemptOutcome); ok {
		parts = append([]string{o.AsString()}, parts...)
	}
	return strings.Join(parts, " ")
}

// spanLabel names a span for the tree.
func spanLabel(s sdktrace.ReadOnlySpan) string {
	switch {
	case s.Name() == telemetry.BackoffSpanName:
		l := "backoff"
		if v, ok := attr(s, keyBackoffDelay); ok {
			l += " " + fmtDur(secs(v.AsFloat64()))
		}
		if v, ok := attr(s, telemetry.KeyBackoffRetryAfter); ok && v.AsBool() {
			l += " (Retry-After)"
		}
		if v, ok := attr(s, telemetry.KeyBackoffInterrupted); ok && v.AsBool() {
			l += " interrupted"
		}
		return l
	case s.SpanKind() == trace.SpanKindServer:
		l := "server"
		if h, ok := attr(s, semconv.ServerAddressKey); ok {
			l += " " + h.AsString()
		}
		l += " " + s.Name()
		if g, ok := attr(s, attrClientGone); ok && g.AsBool() {
			l += " → client gone"
		} else if c := intAttr(s, semconv.HTTPResponseStatusCodeKey); c > 0 {
			l += fmt.Sprintf(" → %d", c)
		}
		return l
	}
	if _, ok := requestAttempts(s); ok {
		l := s.Name()
		if h, ok := attr(s, semconv.ServerAddressKey); ok {
			l += " " + h.AsString()
		}
		return l + " → " + result(s)
	}
	// An attempt span: gotry's CLIENT span, or a generic call's attempt,
	// which always has its kind. An HTTP attempt has its kind (and resend
	// count) only on a resend: without them it is the first.
	k, hasKind := attr(s, telemetry.KeyAttemptKind)
	if hasKind || s.SpanKind() == trace.SpanKindClient {
		kind := "initial"
		if hasKind {
			kind = k.AsString()
		}
		n := intAttr(s, semconv.HTTPRequestResendCountKey) + 1
		l := fmt.Sprintf("%s #%d %s", s.Name(), n, kind)
		if n > 1 {
			l += fmt.Sprintf(" resend=%d", n-1)
		}
		if p, ok := attr(s, telemetry.KeyAttemptProbe); ok && p.AsBool() {
			l += " probe"
		}
		if r := result(s); r != "" {
			l += " → " + r
		}
		return l
	}
	return s.Name()
}

// eventLabel describes a request-span event.
func eventLabel(ev sdktrace.Event) string {
	get := func(k attribute.Key) attribute.Value {
		for _, kv := range ev.Attributes {
			if kv.Key == k {
				return kv.Value
			}
		}
		return attribute.Value{}
	}
	switch ev.Name {
	case eventRetry:
		l := fmt.Sprintf("◆ #%d got %s → ", get(keyAttempt).AsInt64(), get(telemetry.KeyRetryTrigger).AsString())
		switch src := get(telemetry.KeyDelaySource).AsString(); src {
		case telemetry.DelayImmediate:
			return l + "retry at once"
		case telemetry.DelayRetryAfter:
			return l + "wait " + fmtDur(secs(get(keyBackoffDelay).AsFloat64())) + " (Retry-After)"
		default:
			return l + "wait " + fmtDur(secs(get(keyBackoffDelay).AsFloat64())) + " (" + src + ")"
		}
	case eventHedge:
		return fmt.Sprintf("◆ hedge #%d launched, %d in flight", get(keyAttempt).AsInt64(), get(keyHedgeInFlight).AsInt64())
	case eventBudget:
		return fmt.Sprintf("◆ budget refused #%d (%s)", get(keyAttempt).AsInt64(), get(telemetry.KeyAttemptKind).AsString())
	case eventBreakerReject:
		return fmt.Sprintf("◆ breaker %s refused #%d", get(telemetry.KeyBreakerState).AsString(), get(keyAttempt).AsInt64())
	}
	return "◆ " + ev.Name
}

func intAttr(s sdktrace.ReadOnlySpan, k attribute.Key) int {
	v, _ := attr(s, k)
	return int(v.AsInt64())
}

func secs(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// fmtDur prints a duration compactly: 0.4ms, 87ms, 1.23s.
func fmtDur(d time.Duration) string {
	switch {
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%dms", d/time.Millisecond)
	case d < time.Minute:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}
