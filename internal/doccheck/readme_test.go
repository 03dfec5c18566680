package doccheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeIsAFrontPage holds the README to a library's front page: at most
// maxReadmeLines lines (the long material lives in the package docs,
// CONTRIBUTING.md and BENCHMARKS.md), with the two commands for people
// working on gotry and a License section.
func TestReadmeIsAFrontPage(t *testing.T) {
	const maxReadmeLines = 200
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if n := strings.Count(text, "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, want at most %d", n, maxReadmeLines)
	}
	for _, want := range []string{"make demo", "make test", "LICENSE", "go get github.com/MrVSiK/gotry/transport", "MIGRATING.md"} {
		if !strings.Contains(text, want) {
			t.Errorf("README.md does not mention %q", want)
		}
	}
}
