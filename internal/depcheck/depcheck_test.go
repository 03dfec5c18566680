// Package depcheck holds the test that keeps the core standard-library only.
package depcheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCoreImportsOnlyTheStandardLibrary fails if resilience/ or transport/
// (non-test code, transitively) import anything outside the standard library
// and this module. The patterns cover every package below them, the kit
// packages under resilience/ included; the test checks that they are listed,
// so a kit package moved out of reach of the patterns fails it.
func TestCoreImportsOnlyTheStandardLibrary(t *testing.T) {
	out := nonStandardDeps(t, "github.com/MrVSiK/gotry/resilience/...", "github.com/MrVSiK/gotry/transport/...")
	var bad []string
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/MrVSiK/gotry" && !strings.HasPrefix(p, "github.com/MrVSiK/gotry/") {
			bad = append(bad, p)
		}
	}
	if len(bad) > 0 {
		t.Fatalf("the core must import only the standard library, but it imports:\n%s", strings.Join(bad, "\n"))
	}
	listed := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		listed[p] = true
	}
	for _, p := range []string{
		"clock",
		"internal/clock",
		"internal/jitter",
		"internal/option",
		"internal/timeouterr",
		"resilience",
		"resilience/cache",
		"resilience/dnscache",
		"resilience/periodic",
		"resilience/schedule",
		"transport",
		"transport/transporttest",
	} {
		if !listed["github.com/MrVSiK/gotry/"+p] {
			t.Errorf("go list did not check %s; output:\n%s", p, out)
		}
	}
}

// TestEngineDoesNotImportTheKit fails if package resilience (non-test code,
// transitively) imports one of the kit packages below it: the kit builds on
// the engine's package, never the other way round.
func TestEngineDoesNotImportTheKit(t *testing.T) {
	const kit = "github.com/MrVSiK/gotry/resilience/"
	for _, p := range strings.Fields(string(nonStandardDeps(t, "github.com/MrVSiK/gotry/resilience"))) {
		if strings.HasPrefix(p, kit) {
			t.Errorf("package resilience imports %s", p)
		}
	}
}

// nonStandardDeps returns the output of go list -deps for patterns: every
// package they match or import, outside the standard library, one a line.
func nonStandardDeps(t *testing.T, patterns ...string) []byte {
	t.Helper()
	return goList(t, append([]string{"-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}, patterns...)...)
}

// goList runs go list with args and returns its output.
func goList(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(gobin(), append([]string{"list"}, args...)...)
	// The repository's workspace, whatever GOWORK the caller has: the
	// rules below span the modules it lists (the root, telemetry, the
	// demo, internal/sdktest, bench).
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(root(t), "go.work"))
	// Standard output only: on a cold module cache the go command reports
	// each download on standard error ("go: downloading ..."), and those
	// lines are not packages.
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	return out
}

// gobin returns the go command of the toolchain running the test.
func gobin() string {
	// An explicit GOROOT wins (as it did for runtime.GOROOT); otherwise "go"
	// on PATH, where go test puts its own GOROOT/bin first.
	if goroot := os.Getenv("GOROOT"); goroot != "" {
		if p, err := exec.LookPath(filepath.Join(goroot, "bin", "go")); err == nil {
			return p
		}
	}
	return "go"
}

// root returns the repository's root directory: two up from this
// package's, where go test runs it.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestInternalIsFoundation holds ARCHITECTURE.md's rule that internal/ is
// the foundation only: no package under internal/ (non-test code,
// transitively) imports a package of this module outside internal/ other
// than the public clock, so nothing there depends on resilience, transport
// or telemetry and the import graph never runs back up. Code that builds on
// the whole library (the demo) lives under its command instead. The test
// checks that the pattern reached the packages it names, so a rename that
// empties it fails here rather than passing on nothing.
func TestInternalIsFoundation(t *testing.T) {
	const mod = "github.com/MrVSiK/gotry/"
	out := goList(t, "-f", "{{.ImportPath}} {{join .Deps \" \"}}", mod+"internal/...")
	checked := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], mod)
		checked[pkg] = true
		for _, dep := range fields[1:] {
			if !strings.HasPrefix(dep, mod) {
				continue
			}
			dep = strings.TrimPrefix(dep, mod)
			if dep != "clock" && !strings.HasPrefix(dep, "internal/") {
				t.Errorf("%s imports %s; internal/ may import only the standard library, clock and internal/", pkg, dep)
			}
		}
	}
	for _, p := range []string{"internal/benchratio", "internal/clock", "internal/jitter", "internal/kiterr", "internal/sdktest", "internal/testwait", "internal/timeouterr"} {
		if !checked[p] {
			t.Errorf("go list did not check %s; output:\n%s", p, out)
		}
	}
}

// TestLayering holds the import rules ARCHITECTURE.md draws: each package
// of this module may import (transitively, non-test code) only the module
// packages listed for it, so telemetry never leaks into the core and the
// transport never into the engine. (That nothing imports the demo the
// compiler holds: it is cmd/gotry-demo/internal/demo, importable only from
// below cmd/gotry-demo.)
func TestLayering(t *testing.T) {
	const mod = "github.com/MrVSiK/gotry/"
	allowed := map[string][]string{
		"clock":                    {},
		"internal/clock":           {"clock"},
		"internal/clock/fakeclock": {"clock"},
		"internal/jitter":          {},
		"internal/kiterr":          {},
		"internal/option":          {},
		"internal/timeouterr":      {},
		"resilience":               {"clock", "internal/clock", "internal/jitter", "internal/option", "internal/timeouterr"},
		"resilience/schedule":      {"clock", "internal/clock", "internal/jitter", "internal/kiterr", "internal/option", "internal/timeouterr", "resilience"},
		"resilience/periodic":      {"clock", "internal/clock", "internal/jitter", "internal/kiterr"},
		"resilience/cache":         {"clock", "internal/clock", "internal/kiterr"},
		"resilience/dnscache":      {"clock", "internal/clock", "internal/kiterr", "resilience/cache"},
		"transport":                {"clock", "internal/clock", "internal/jitter", "internal/option", "internal/timeouterr", "resilience"},
		"transport/transporttest":  {"clock"},
		"telemetry":                {"clock", "internal/clock", "internal/jitter", "internal/option", "internal/timeouterr", "resilience", "transport"},
		"telemetry/promexport":     {"clock", "internal/clock", "internal/jitter", "internal/option", "internal/timeouterr", "resilience", "transport", "telemetry"},
	}
	var pkgs []string
	for p := range allowed {
		pkgs = append(pkgs, mod+p)
	}
	out := goList(t, append([]string{"-f", "{{.ImportPath}} {{join .Deps \" \"}}"}, pkgs...)...)
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], mod)
		ok, listed := allowed[pkg]
		if !listed {
			t.Errorf("go list reported %s, which the rules do not name", fields[0])
			continue
		}
		seen++
		for _, dep := range fields[1:] {
			if !strings.HasPrefix(dep, mod) {
				continue
			}
			dep = strings.TrimPrefix(dep, mod)
			if !slices.Contains(ok, dep) {
				t.Errorf("%s imports %s; ARCHITECTURE.md allows only %v", pkg, dep, ok)
			}
		}
	}
	if seen != len(allowed) {
		t.Errorf("go list checked %d of the %d packages:\n%s", seen, len(allowed), out)
	}
}
