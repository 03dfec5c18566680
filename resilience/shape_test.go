package resilience

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// parsePackage parses the package's non-test files in this directory.
func parsePackage(t *testing.T) (*token.FileSet, []*ast.File) {
	t.Helper()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, p, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return fset, files
}

// TestCallStateHasFewFlags: a call's modes are told apart by which of its
// values exist (its concurrent half, a hedge timer), not by flags; run,
// callState and attempt together keep at most 6 booleans.
func TestCallStateHasFewFlags(t *testing.T) {
	_, files := parsePackage(t)
	counted := map[string]bool{"run": true, "callState": true, "attempt": true}
	var flags []string
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || !counted[ts.Name.Name] {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return false
			}
			for _, fl := range st.Fields.List {
				if id, ok := fl.Type.(*ast.Ident); ok && id.Name == "bool" {
					for _, name := range fl.Names {
						flags = append(flags, ts.Name.Name+"."+name.Name)
					}
				}
			}
			return false
		})
	}
	if len(flags) > 6 {
		t.Errorf("run, callState and attempt have %d booleans, want at most 6: %v", len(flags), flags)
	}
}
