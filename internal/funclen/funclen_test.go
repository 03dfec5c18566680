// Package funclen holds the test that keeps the core's functions short.
package funclen

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxLines is the longest a function may be, counted from its signature's
// first line through its closing brace.
const maxLines = 60

// checked are the directories, relative to the repository root, whose
// non-test Go files TestFunctionLength holds to maxLines.
var checked = []string{
	"resilience",
	"transport",
}

// TestFunctionLength fails naming every function or method longer than
// maxLines lines in the non-test files of the checked directories (not
// their subdirectories).
func TestFunctionLength(t *testing.T) {
	for _, dir := range checked {
		long, err := longFuncs(filepath.Join("..", "..", dir), maxLines)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range long {
			t.Errorf("%s: over %d lines", f, maxLines)
		}
	}
}

// longFuncs lists, as "file:line name (n lines)", the functions in dir's
// non-test Go files longer than limit lines.
func longFuncs(dir string, limit int) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var long []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		path := filepath.Join(dir, name)
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			start, end := fset.Position(fd.Pos()).Line, fset.Position(fd.End()).Line
			if n := end - start + 1; n > limit {
				long = append(long, fmt.Sprintf("%s:%d %s (%d lines)", filepath.ToSlash(path), start, funcName(fd), n))
			}
		}
	}
	return long, nil
}

// funcName is fd's name, with its receiver's type for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	switch x := typ.(type) {
	case *ast.IndexExpr:
		typ = x.X
	case *ast.IndexListExpr:
		typ = x.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
