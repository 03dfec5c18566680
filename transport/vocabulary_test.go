package transport_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/clock"
	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// One option vocabulary (issue #29): a setting the transport and the
// Retrier share has one name, one default and one validation in both
// packages. These tests hold that, so it does not rest on convention.

// optionsOf returns the names of the exported functions of the package in
// dir that return its Option.
func optionsOf(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !fd.Name.IsExported() || fd.Type.Results == nil || len(fd.Type.Results.List) != 1 {
				continue
			}
			if id, ok := fd.Type.Results.List[0].Type.(*ast.Ident); ok && id.Name == "Option" {
				names = append(names, fd.Name.Name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// Options only one side has, each with its reason.
var (
	transportOnly = map[string]string{
		"WithAttemptHeader":           "an HTTP header",
		"WithClassifier":              "classifies HTTP responses; the Retrier's is WithRetryIf",
		"WithMaxBufferedBody":         "request bodies",
		"WithMaxRetainedBody":         "response bodies",
		"WithNonIdempotentRetries":    "HTTP methods' idempotency",
		"WithPerAttemptHeaderTimeout": "HTTP response headers",
		"WithRetryableStatuses":       "HTTP status codes",
		"WithHopPeers":                "the hop protocol's HTTP headers",
		"WithPushback":                "the hop protocol's HTTP answer header",
		"WithTrustedCallers":          "Middleware's callers: HTTP requests",
	}
	retrierOnly = map[string]string{
		"WithRetryIf": "classifies errors; the transport's is WithClassifier",
	}
)

func TestOneOptionVocabulary(t *testing.T) {
	tr, rs := optionsOf(t, "."), optionsOf(t, "../resilience")
	for _, n := range tr {
		if _, only := transportOnly[n]; !only && !slices.Contains(rs, n) {
			t.Errorf("transport.%s has no resilience.%s: add it to the Retrier, or to transportOnly with its reason", n, n)
		}
	}
	for _, n := range rs {
		if _, only := retrierOnly[n]; !only && !slices.Contains(tr, n) {
			t.Errorf("resilience.%s has no transport.%s: add it to the transport, or to retrierOnly with its reason", n, n)
		}
	}
}

// The shared defaults are one set of constants.
func TestSharedDefaults(t *testing.T) {
	if transport.DefaultMaxAttempts != resilience.DefaultMaxAttempts ||
		transport.DefaultMaxRetryAfter != resilience.DefaultMaxRetryAfter ||
		transport.DefaultBudgetRatio != resilience.DefaultBudgetRatio ||
		transport.DefaultBudgetReserve != resilience.DefaultBudgetReserve {
		t.Fatal("the transport's defaults differ from the Retrier's")
	}
	b := 200 * time.Millisecond // the default backoff's first full-jitter delay stays below its base
	if d1, d2 := transport.DefaultBackoff().Delay(1, 0), resilience.DefaultBackoff().Delay(1, 0); d1 > b || d2 > b {
		t.Errorf("default backoffs' first delays %v and %v, want at most %v", d1, d2, b)
	}
}

// Each option the transport shares with the Retrier is written once, in
// package resilience: transport.Option is resilience.Option, and a
// transport function of a shared option's name only returns resilience's
// option of that name with its own arguments. This fails if the transport
// implements a shared option again (or grows a twin of resilience's
// setting helper); a new shared option is written in resilience alone
// (and, for its name in this package, forwarded).
func TestSharedOptionsWrittenOnce(t *testing.T) {
	if reflect.TypeFor[transport.Option]() != reflect.TypeFor[resilience.Option]() {
		t.Fatal("transport.Option is not resilience.Option")
	}
	shared := map[string]bool{}
	for _, n := range optionsOf(t, "../resilience") {
		if _, only := retrierOnly[n]; !only && n != "WithHooksFor" { // its func takes the Transport, or the Retrier, being built
			shared[n] = true
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	forwarded := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil {
				continue
			}
			if fd.Name.Name == "setting" {
				t.Errorf("%s: transport has a setting helper of its own: shared options are resilience's", fset.Position(fd.Pos()))
			}
			if !shared[fd.Name.Name] {
				continue
			}
			if !forwards(fd) {
				t.Errorf("%s: transport.%s does more than return resilience.%s: a shared option is written once, in resilience",
					fset.Position(fd.Pos()), fd.Name.Name, fd.Name.Name)
			}
			forwarded++
		}
	}
	if forwarded != len(shared) {
		t.Errorf("transport forwards %d of resilience's %d shared options", forwarded, len(shared))
	}
}

// forwards reports whether fd's body is exactly
// "return resilience.<its name>(<its parameters, in order>)".
func forwards(fd *ast.FuncDecl) bool {
	if fd.Body == nil || len(fd.Body.List) != 1 {
		return false
	}
	ret, ok := fd.Body.List[0].(*ast.ReturnStmt)
	if !ok || len(ret.Results) != 1 {
		return false
	}
	call, ok := ret.Results[0].(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != fd.Name.Name {
		return false
	}
	if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "resilience" {
		return false
	}
	var params []string
	for _, f := range fd.Type.Params.List {
		for _, n := range f.Names {
			params = append(params, n.Name)
		}
	}
	if len(call.Args) != len(params) {
		return false
	}
	for i, a := range call.Args {
		if id, ok := a.(*ast.Ident); !ok || id.Name != params[i] {
			return false
		}
	}
	return true
}

// The same nonsense fails in both packages, at construction, with one
// message naming the option and the field.
func TestSharedOptionsRejectTheSameNonsense(t *testing.T) {
	cases := []struct {
		name      string
		transport func()
		retrier   func()
	}{
		{"WithMaxAttempts", func() { transport.WithMaxAttempts(0) }, func() { resilience.WithMaxAttempts(0) }},
		{"WithBackoff", func() { transport.WithBackoff(nil) }, func() { resilience.WithBackoff(nil) }},
		{"WithPerAttemptTimeout", func() { transport.WithPerAttemptTimeout(-1) }, func() { resilience.WithPerAttemptTimeout(-1) }},
		{"WithHedging", func() { transport.WithHedging(-1, 1) }, func() { resilience.WithHedging(-1, 1) }},
		{"WithAdaptiveHedging", func() { transport.WithAdaptiveHedging(resilience.AdaptiveHedging{MaxExtraLoad: 2}, 1) },
			func() { resilience.WithAdaptiveHedging(resilience.AdaptiveHedging{MaxExtraLoad: 2}, 1) }},
		{"WithRetryBudget", func() { transport.WithRetryBudget(-1, 0) }, func() { resilience.WithRetryBudget(-1, 0) }},
		{"WithRetryBudget", func() { transport.WithRetryBudget(math.NaN(), 2) }, func() { resilience.WithRetryBudget(math.NaN(), 2) }},
		{"WithRetryBudget", func() { transport.WithRetryBudget(0.1, -1) }, func() { resilience.WithRetryBudget(0.1, -1) }},
		{"WithBreaker", func() { transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: -1}) },
			func() { resilience.WithBreaker(resilience.BreakerConfig{FailureThreshold: -1}) }},
		{"WithConcurrencyLimit", func() { transport.WithConcurrencyLimit(resilience.ConcurrencyLimit{MaxLimit: -1}) },
			func() { resilience.WithConcurrencyLimit(resilience.ConcurrencyLimit{MaxLimit: -1}) }},
		{"WithMaxRetryAfter", func() { transport.WithMaxRetryAfter(-1) }, func() { resilience.WithMaxRetryAfter(-1) }},
		{"WithMaxKeys", func() { transport.WithMaxKeys(0) }, func() { resilience.WithMaxKeys(0) }},
	}
	for _, c := range cases {
		msgs := map[string]string{}
		for side, f := range map[string]func(){"transport": c.transport, "resilience": c.retrier} {
			msg := func() (msg string) {
				defer func() { msg = fmt.Sprint(recover()) }()
				f()
				return "<nil>"
			}()
			if !strings.HasPrefix(msg, "resilience: "+c.name+": Settings.") && !strings.HasPrefix(msg, "resilience: "+c.name+": "+strings.TrimPrefix(c.name, "With")) {
				t.Errorf("%s.%s with nonsense: panic %q, want one naming %s and the field", side, c.name, msg, c.name)
			}
			msgs[side] = msg
		}
		if msgs["transport"] != msgs["resilience"] {
			t.Errorf("%s: the transport says %q, the Retrier %q: one validation gives one reason", c.name, msgs["transport"], msgs["resilience"])
		}
	}
}

// One settings type: a shared option sets the same field of
// resilience.Settings to the same value in both packages, from the same
// defaults, which is what a service that logs its configuration reads.
func TestOneSettingsType(t *testing.T) {
	if tr, rs, def := transport.New(nil).Settings(), resilience.NewRetrier().Settings(), resilience.DefaultSettings(); !reflect.DeepEqual(tr, def) || !reflect.DeepEqual(rs, def) {
		t.Fatalf("defaults differ:\ntransport %+v\nretrier   %+v\ndefaults  %+v", tr, rs, def)
	}
	fake := clock.NewFake(time.Unix(0, 0))
	backoff := resilience.Constant(7 * time.Millisecond)
	ah := resilience.AdaptiveHedging{MaxExtraLoad: 0.05}
	cases := []struct {
		name      string
		transport transport.Option
		retrier   resilience.Option
		want      func(*resilience.Settings)
	}{
		{"WithMaxAttempts", transport.WithMaxAttempts(5), resilience.WithMaxAttempts(5), func(s *resilience.Settings) { s.MaxAttempts = 5 }},
		{"WithBackoff", transport.WithBackoff(backoff), resilience.WithBackoff(backoff), func(s *resilience.Settings) { s.Backoff = backoff }},
		{"WithPerAttemptTimeout", transport.WithPerAttemptTimeout(time.Second), resilience.WithPerAttemptTimeout(time.Second),
			func(s *resilience.Settings) { s.PerAttemptTimeout = time.Second }},
		{"WithHedging", transport.WithHedging(time.Millisecond, 2), resilience.WithHedging(time.Millisecond, 2),
			func(s *resilience.Settings) { s.HedgeDelay, s.MaxHedges = time.Millisecond, 2 }},
		{"WithAdaptiveHedging", transport.WithAdaptiveHedging(ah, 1), resilience.WithAdaptiveHedging(ah, 1),
			func(s *resilience.Settings) {
				s.AdaptiveHedging, s.MaxHedges = &resilience.AdaptiveHedging{MaxExtraLoad: 0.05, StartingCredit: 20}, 1
			}},
		{"WithRetryBudget", transport.WithRetryBudget(0.2, 5), resilience.WithRetryBudget(0.2, 5),
			func(s *resilience.Settings) { s.BudgetRatio, s.BudgetReserve = 0.2, 5 }},
		{"WithBreaker", transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 3}), resilience.WithBreaker(resilience.BreakerConfig{FailureThreshold: 3}),
			func(s *resilience.Settings) {
				s.Breaker = &resilience.BreakerConfig{FailureThreshold: 3, OpenDuration: resilience.DefaultOpenDuration, HalfOpenProbes: resilience.DefaultHalfOpenProbes}
			}},
		{"WithBreaker zero", transport.WithBreaker(resilience.BreakerConfig{}), resilience.WithBreaker(resilience.BreakerConfig{}),
			func(s *resilience.Settings) {
				s.Breaker = &resilience.BreakerConfig{FailureThreshold: resilience.DefaultFailureThreshold, OpenDuration: resilience.DefaultOpenDuration, HalfOpenProbes: resilience.DefaultHalfOpenProbes}
			}},
		{"WithConcurrencyLimit", transport.WithConcurrencyLimit(resilience.ConcurrencyLimit{MaxLimit: 50}), resilience.WithConcurrencyLimit(resilience.ConcurrencyLimit{MaxLimit: 50}),
			func(s *resilience.Settings) {
				s.ConcurrencyLimit = &resilience.ConcurrencyLimit{InitialLimit: resilience.DefaultInitialLimit, MinLimit: resilience.DefaultMinLimit, MaxLimit: 50}
			}},
		{"WithConcurrencyLimit zero", transport.WithConcurrencyLimit(resilience.ConcurrencyLimit{}), resilience.WithConcurrencyLimit(resilience.ConcurrencyLimit{}),
			func(s *resilience.Settings) {
				s.ConcurrencyLimit = &resilience.ConcurrencyLimit{InitialLimit: resilience.DefaultInitialLimit, MinLimit: resilience.DefaultMinLimit, MaxLimit: resilience.DefaultMaxLimit}
			}},
		{"WithAdaptiveHedging zero", transport.WithAdaptiveHedging(resilience.AdaptiveHedging{}, 1), resilience.WithAdaptiveHedging(resilience.AdaptiveHedging{}, 1),
			func(s *resilience.Settings) {
				s.AdaptiveHedging, s.MaxHedges = &resilience.AdaptiveHedging{MaxExtraLoad: resilience.DefaultMaxExtraLoad, StartingCredit: 20}, 1
			}},
		{"WithRetryBudget off", transport.WithRetryBudget(0, 0), resilience.WithRetryBudget(0, 0),
			func(s *resilience.Settings) { s.BudgetRatio, s.BudgetReserve = resilience.Off, resilience.Off }},
		{"WithMaxKeys", transport.WithMaxKeys(9), resilience.WithMaxKeys(9), func(s *resilience.Settings) { s.MaxKeys = 9 }},
		{"WithMaxRetryAfter", transport.WithMaxRetryAfter(time.Second), resilience.WithMaxRetryAfter(time.Second),
			func(s *resilience.Settings) { s.MaxRetryAfter = time.Second }},
		{"WithClock", transport.WithClock(fake), resilience.WithClock(fake), func(s *resilience.Settings) { s.Clock = fake }},
	}
	for _, c := range cases {
		want := resilience.DefaultSettings()
		c.want(&want)
		tr, rs := transport.New(nil, c.transport).Settings(), resilience.NewRetrier(c.retrier).Settings()
		if !reflect.DeepEqual(tr, want) || !reflect.DeepEqual(rs, want) {
			t.Errorf("%s:\ntransport %+v\nretrier   %+v\nwant      %+v", c.name, tr, rs, want)
		}
	}

	// What Settings gives back is a copy.
	tr := transport.New(nil, transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 3}))
	tr.Settings().Breaker.FailureThreshold = 99
	if got := tr.Settings().Breaker.FailureThreshold; got != 3 {
		t.Errorf("changing a returned Settings changed the transport's: FailureThreshold %d", got)
	}
}
