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
// and this module.
func TestCoreImportsOnlyTheStandardLibrary(t *testing.T) {
	// An explicit GOROOT wins (as it did for runtime.GOROOT); otherwise "go"
	// on PATH, where go test puts its own GOROOT/bin first.
	gobin := "go"
	if goroot := os.Getenv("GOROOT"); goroot != "" {
		if p, err := exec.LookPath(filepath.Join(goroot, "bin", "go")); err == nil {
			gobin = p
		}
	}
	cmd := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}",
		"github.com/MrVSiK/gotry/resilience/...", "github.com/MrVSiK/gotry/transport/...")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	var bad []string
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/MrVSiK/gotry" && !strings.HasPrefix(p, "github.com/MrVSiK/gotry/") {
			bad = append(bad, p)
		}
	}
	if len(bad) > 0 {
		t.Fatalf("the core must import only the standard library, but it imports:\n%s", strings.Join(bad, "\n"))
	}
	if !strings.Contains(string(out), "github.com/MrVSiK/gotry/internal/clock") {
		t.Fatalf("go list output looks wrong (no internal/clock):\n%s", out)
	}
}
