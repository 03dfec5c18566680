// Package depcheck holds the test that keeps the core standard-library only.
package depcheck

import (
	"os"
	"os/exec"
	"path/filepath"
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
		"internal/clock",
		"internal/jitter",
		"resilience",
		"resilience/cache",
		"resilience/dnscache",
		"resilience/periodic",
		"resilience/schedule",
		"transport",
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
	// An explicit GOROOT wins (as it did for runtime.GOROOT); otherwise "go"
	// on PATH, where go test puts its own GOROOT/bin first.
	gobin := "go"
	if goroot := os.Getenv("GOROOT"); goroot != "" {
		if p, err := exec.LookPath(filepath.Join(goroot, "bin", "go")); err == nil {
			gobin = p
		}
	}
	args := append([]string{"list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}, patterns...)
	out, err := exec.Command(gobin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	return out
}
