package doccheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// deprecatedParagraph is the start of a "Deprecated:" paragraph of a doc
// comment (the form go doc, gopls and staticcheck recognise), on a line
// comment or inside a block comment.
var deprecatedParagraph = regexp.MustCompile(`(?m)^[ \t]*(?://[ \t]*)?Deprecated:`)

// TestNothingIsDeprecated fails if a non-test Go file anywhere in the
// repository, every module of it included, marks a name "Deprecated:".
// Nothing is deprecated before it was released (STYLE.md, rule 17): until
// a release has shipped a name, a better one replaces it outright and its
// callers move in the same change. Once a release has shipped a name that
// must go, this test gives way to a list of what that release promised.
func TestNothingIsDeprecated(t *testing.T) {
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, loc := range deprecatedParagraph.FindAllIndex(data, -1) {
			line := 1 + strings.Count(string(data[:loc[0]]), "\n")
			t.Errorf("%s:%d: a Deprecated: comment; nothing is deprecated before a release shipped it: remove the name and move its callers", path, line)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("the walk found %d Go files: the root is wrong", files)
	}
}
