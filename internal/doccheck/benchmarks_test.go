package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestBenchmarksIsAReport holds BENCHMARKS.md to a report of today's
// figures, not a log: at most maxBenchmarksLines lines. A new measurement
// replaces the table it supersedes; the history is in git.
func TestBenchmarksIsAReport(t *testing.T) {
	const maxBenchmarksLines = 600
	b, err := os.ReadFile(filepath.Join(root, "BENCHMARKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > maxBenchmarksLines {
		t.Errorf("BENCHMARKS.md has %d lines, want at most %d: replace the tables a new run supersedes, and leave the history to git", n, maxBenchmarksLines)
	}
}

// mdLink is a Markdown link with a fragment: the file (empty for the
// same document) and the anchor.
var mdLink = regexp.MustCompile(`\]\(([^()\s#]*)#([^()\s]+)\)`)

// TestDocLinksFindTheirHeadings fails when a doc links to a heading
// (FILE.md#anchor, or #anchor within itself) that the target does not
// have, as GitHub names a heading's anchor: a renamed or renumbered
// section of BENCHMARKS.md then shows up here, not as a reader's dead
// link.
func TestDocLinksFindTheirHeadings(t *testing.T) {
	anchors := map[string]map[string]bool{} // by path relative to root
	anchorsOf := func(path string) (map[string]bool, bool) {
		if a, ok := anchors[path]; ok {
			return a, a != nil
		}
		data, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			anchors[path] = nil
			return nil, false
		}
		a := map[string]bool{}
		inFence := false
		for _, l := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(l, "```") {
				inFence = !inFence
			}
			if !inFence && strings.HasPrefix(l, "#") {
				a[headingAnchor(strings.TrimLeft(l, "#"))] = true
			}
		}
		anchors[path] = a
		return a, true
	}
	for _, doc := range docs {
		data, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		text := fence.ReplaceAllString(string(data), "")
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			file, anchor := m[1], m[2]
			if strings.Contains(file, "://") || (file != "" && !strings.HasSuffix(file, ".md")) {
				continue // another site's page, or a file that is not a doc
			}
			target := doc
			if file != "" {
				target = filepath.ToSlash(filepath.Join(filepath.Dir(doc), file))
			}
			a, ok := anchorsOf(target)
			if !ok {
				continue // a missing file is TestDocsNameCodeThatExists's to report
			}
			if !a[anchor] {
				t.Errorf("%s links to %s#%s; %s has no such heading", doc, target, anchor, target)
			}
		}
	}
}

// headingAnchor is the anchor GitHub gives a heading's text: lower case,
// punctuation dropped (hyphens and underscores kept), spaces turned into
// hyphens.
func headingAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
