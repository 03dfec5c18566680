package transport

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzParseRetryAfter feeds arbitrary header values and clocks to
// parseRetryAfter. It must never panic and never return a negative delay; a
// value of only digits is whole seconds (saturating at the largest
// Duration), anything else that parses is an HTTP date counted from now, and
// everything else is rejected with a zero delay.
func FuzzParseRetryAfter(f *testing.F) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, v := range []string{
		"0", "120", " 5\t", "-1", "+5", "1.5", "1e3", "0x10", "", " ",
		"9223372036", "9223372037", "99999999999999999999999",
		now.Add(7 * time.Second).Format(http.TimeFormat),
		now.Add(-time.Hour).Format(http.TimeFormat),
		"Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
		"\u0663", "5\x00", "Fri, 31 Dec 9999 23:59:59 GMT",
	} {
		f.Add(v, now.Unix())
	}
	f.Fuzz(func(t *testing.T, v string, nowUnix int64) {
		now := time.Unix(nowUnix, 0)
		d, ok := parseRetryAfter(v, now)
		if d < 0 {
			t.Fatalf("parseRetryAfter(%q) = %v, negative", v, d)
		}
		if !ok && d != 0 {
			t.Fatalf("parseRetryAfter(%q) rejected the value but returned %v", v, d)
		}
		// Surrounding whitespace never changes the answer.
		if d2, ok2 := parseRetryAfter(" \t"+v+"\t ", now); d2 != d || ok2 != ok {
			t.Fatalf("parseRetryAfter(%q) = %v,%v but with surrounding spaces %v,%v", v, d, ok, d2, ok2)
		}
		trimmed := strings.TrimSpace(v)
		if trimmed != "" && strings.Trim(trimmed, "0123456789") == "" {
			if !ok {
				t.Fatalf("parseRetryAfter(%q) rejected a number of seconds", v)
			}
			secs, err := strconv.ParseInt(trimmed, 10, 64)
			want := time.Duration(math.MaxInt64)
			if err == nil && secs <= math.MaxInt64/int64(time.Second) {
				want = time.Duration(secs) * time.Second
			}
			if d != want {
				t.Fatalf("parseRetryAfter(%q) = %v, want %v", v, d, want)
			}
			return
		}
		date, err := http.ParseTime(trimmed)
		if ok != (err == nil) {
			t.Fatalf("parseRetryAfter(%q) ok=%v but http.ParseTime err=%v", v, ok, err)
		}
		if !ok {
			return
		}
		if want := max(date.Sub(now), 0); d != want {
			t.Fatalf("parseRetryAfter(%q) = %v, want %v", v, d, want)
		}
		// A later clock never makes a date further away.
		if later, _ := parseRetryAfter(v, now.Add(time.Second)); later > d {
			t.Fatalf("parseRetryAfter(%q): %v at now, %v a second later", v, d, later)
		}
	})
}
