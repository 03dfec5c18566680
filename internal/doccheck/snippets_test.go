package doccheck

// The README's Go snippets compile (TestSnippetsCompile). Every ```go block
// of a doc in snippetDocs is built as a program, in one of three forms,
// chosen by the block itself or by an HTML comment (which GitHub does not
// show) on the line before its fence, blank lines between allowed:
//
//   - a complete file: a block whose first line of code is a package
//     clause is built as it is (package main, so that it links);
//   - <!-- snippet: body --> marks statements: the block's leading import
//     declarations become the file's, the rest becomes main's body;
//   - <!-- snippet: decls --> marks top-level declarations (vars, funcs,
//     types): the block's imports, then its declarations, in package main,
//     with an empty main unless it declares one.
//
// In the two wrapped forms the standard-library packages a block uses by
// their usual names (http, time, context, log, ...: stdImports) are
// imported for it, as an editor would; every other package, gotry's
// included, the block imports itself, as a reader copying it must. A
// gotry import is also what tells the test which of the repository's
// modules the snippet needs (the root, or telemetry once it is a module of
// its own, or a contrib module). A ```go block that is neither a file nor
// marked fails the test; a block that is not meant to build is fenced as
// something else (```text).
//
// The snippets are main packages of one temporary module that requires the
// gotry modules they import and replaces every module of the repository (a
// directory below the root with a go.mod) with its directory, so
// github.com/MrVSiK/gotry/telemetry resolves to ../telemetry when that has
// a go.mod and to the root module's package while it does not. It starts
// from those modules' go.sum and is built with GOFLAGS=-mod=mod, so any
// other requirement comes from the module cache or the module proxy; then
// it is vetted. //line directives make every error name the doc's line.

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// snippetDocs are the docs whose ```go blocks must build, relative to root.
var snippetDocs = []string{"README.md"}

// stdImports are the standard-library packages a wrapped snippet may use
// without importing them, by the name it uses.
var stdImports = map[string]string{
	"bufio":    "bufio",
	"bytes":    "bytes",
	"context":  "context",
	"errors":   "errors",
	"fmt":      "fmt",
	"http":     "net/http",
	"httptest": "net/http/httptest",
	"io":       "io",
	"json":     "encoding/json",
	"log":      "log",
	"net":      "net",
	"os":       "os",
	"signal":   "os/signal",
	"slog":     "log/slog",
	"strconv":  "strconv",
	"strings":  "strings",
	"sync":     "sync",
	"time":     "time",
	"url":      "net/url",
}

// Snippet forms.
const (
	formFile  = "file"
	formBody  = "body"
	formDecls = "decls"
)

const modulePath = "github.com/MrVSiK/gotry"

// snippet is one ```go block of a doc.
type snippet struct {
	doc   string   // the doc, relative to root
	line  int      // the doc's line of the block's first line
	form  string   // formFile, formBody or formDecls
	lines []string // the block, its fence's indentation removed
}

var (
	goFence     = regexp.MustCompile("^([ \t]*)```go[ \t]*$")
	anyFence    = regexp.MustCompile("^[ \t]*```")
	marker      = regexp.MustCompile(`^[ \t]*<!--[ \t]*snippet:[ \t]*(\S*)[ \t]*-->[ \t]*$`)
	packageLine = regexp.MustCompile(`^package [A-Za-z_]\w*`)
	mainFunc    = regexp.MustCompile(`(?m)^func main\(\)`)
)

// extractSnippets returns the ```go blocks of doc, whose text is data, and
// every way it breaks the conventions: a block neither a file nor marked,
// an unknown form, a marker that no ```go block follows, a block never
// closed.
func extractSnippets(doc, data string) ([]snippet, []string) {
	var (
		out  []snippet
		bad  []string
		mark string // the form of a marker waiting for its block
		at   int    // the marker's line
	)
	lines := strings.Split(data, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if m := marker.FindStringSubmatch(l); m != nil {
			if mark != "" {
				bad = append(bad, fmt.Sprintf("%s:%d: a snippet marker that no ```go block follows", doc, at))
			}
			mark, at = m[1], i+1
			continue
		}
		m := goFence.FindStringSubmatch(l)
		if m == nil {
			if anyFence.MatchString(l) { // another language's block: skip it whole
				for i++; i < len(lines) && !anyFence.MatchString(lines[i]); i++ {
				}
			}
			if strings.TrimSpace(l) != "" && mark != "" {
				bad = append(bad, fmt.Sprintf("%s:%d: a snippet marker that no ```go block follows", doc, at))
				mark = ""
			}
			continue
		}
		s := snippet{doc: doc, line: i + 2, form: mark}
		closed := false
		for i++; i < len(lines); i++ {
			if anyFence.MatchString(lines[i]) {
				closed = true
				break
			}
			s.lines = append(s.lines, strings.TrimPrefix(lines[i], m[1]))
		}
		switch {
		case !closed:
			bad = append(bad, fmt.Sprintf("%s:%d: a ```go block that is never closed", doc, s.line-1))
		case mark == "" && packageLine.MatchString(firstCode(s.lines)):
			s.form = formFile
			out = append(out, s)
		case mark == "":
			bad = append(bad, fmt.Sprintf("%s:%d: a ```go block that is neither a file (a package clause) nor marked "+
				"<!-- snippet: body --> or <!-- snippet: decls --> (see internal/doccheck/snippets_test.go)", doc, s.line-1))
		case mark != formBody && mark != formDecls:
			bad = append(bad, fmt.Sprintf("%s:%d: unknown snippet form %q: want body or decls", doc, at, mark))
		default:
			out = append(out, s)
		}
		mark = ""
	}
	if mark != "" {
		bad = append(bad, fmt.Sprintf("%s:%d: a snippet marker that no ```go block follows", doc, at))
	}
	return out, bad
}

// firstCode returns the first line of lines that is neither blank nor a
// line comment.
func firstCode(lines []string) string {
	for _, l := range lines {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "//") {
			return t
		}
	}
	return ""
}

// splitImports returns how many of lines, from the first, are import
// declarations (and the blank lines and comments among them).
func splitImports(lines []string) int {
	n := 0
	for i := 0; i < len(lines); i++ {
		t := strings.TrimSpace(lines[i])
		switch {
		case t == "" || strings.HasPrefix(t, "//"):
			continue
		case strings.HasPrefix(t, "import ("):
			for i < len(lines) && strings.TrimSpace(lines[i]) != ")" {
				i++
			}
		case strings.HasPrefix(t, "import "):
		default:
			return n
		}
		n = i + 1
	}
	return n
}

// source returns the snippet as a Go file of package main whose //line
// directives name file (the doc's path) and its lines.
func (s snippet) source(file string) string {
	directive := func(line int) string { return "//line " + file + ":" + strconv.Itoa(line) + "\n" }
	if s.form == formFile {
		return directive(s.line) + strings.Join(s.lines, "\n") + "\n"
	}
	n := splitImports(s.lines)
	var b strings.Builder
	b.WriteString(directive(s.line) + strings.Join(s.lines[:n], "\n") + "\n")
	rest := strings.Join(s.lines[n:], "\n")
	switch s.form {
	case formBody:
		b.WriteString("func main() {\n" + directive(s.line+n) + rest + "\n}\n")
	case formDecls:
		b.WriteString(directive(s.line+n) + rest + "\n")
		if !mainFunc.MatchString(rest) {
			b.WriteString("func main() {}\n")
		}
	}
	code := b.String()
	head := "package main\n\n"
	if std := missingStdImports(head + code); len(std) > 0 {
		head += "import (\n"
		for _, p := range std {
			head += "\t" + strconv.Quote(p) + "\n"
		}
		head += ")\n\n"
	}
	return head + code
}

// missingStdImports returns the import paths of the stdImports that src
// uses as pkg.Name but neither imports nor declares as a name of its own,
// sorted. A src that does not parse gets none: its build reports why.
func missingStdImports(src string) []string {
	f, err := parser.ParseFile(token.NewFileSet(), "", src, parser.SkipObjectResolution)
	if err != nil {
		return nil
	}
	own := map[string]bool{}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		own[name] = true
	}
	used := map[string]bool{}
	declare := func(exprs ...ast.Expr) {
		for _, e := range exprs {
			if id, ok := e.(*ast.Ident); ok {
				own[id.Name] = true
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok {
				used[id.Name] = true
			}
		case *ast.AssignStmt:
			if n.Tok == token.DEFINE {
				declare(n.Lhs...)
			}
		case *ast.RangeStmt:
			if n.Tok == token.DEFINE {
				declare(n.Key, n.Value)
			}
		case *ast.ValueSpec:
			for _, id := range n.Names {
				own[id.Name] = true
			}
		case *ast.Field:
			for _, id := range n.Names {
				own[id.Name] = true
			}
		case *ast.TypeSpec:
			own[n.Name.Name] = true
		case *ast.FuncDecl:
			own[n.Name.Name] = true
		}
		return true
	})
	var paths []string
	for name := range used {
		if p, ok := stdImports[name]; ok && !own[name] {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	return paths
}

// repoModules returns every module of the repository whose path is
// modulePath or below it, by path, with its absolute directory.
func repoModules(t *testing.T) map[string]string {
	t.Helper()
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	moduleLine := regexp.MustCompile(`(?m)^module[ \t]+"?([^\s"]+)"?`)
	mods := map[string]string{}
	for dir, data := range goModFiles(t) {
		if m := moduleLine.FindSubmatch(data); m != nil {
			if p := string(m[1]); p == modulePath || strings.HasPrefix(p, modulePath+"/") {
				mods[p] = filepath.Join(abs, filepath.FromSlash(dir))
			}
		}
	}
	if mods[modulePath] != abs {
		t.Fatalf("no module %s at the root %s: %v", modulePath, abs, mods)
	}
	return mods
}

// goModFiles returns the contents of every go.mod of the repository, by
// its directory relative to root, slash-separated ("." for the root's);
// hidden directories, testdata and vendor are skipped.
func goModFiles(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "go.mod" {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = data
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// owningModule returns the module of mods that holds package path: the
// longest module path that is path or a prefix of it at a slash.
func owningModule(mods map[string]string, path string) string {
	best := ""
	for m := range mods {
		if (path == m || strings.HasPrefix(path, m+"/")) && len(m) > len(best) {
			best = m
		}
	}
	return best
}

// goBin is the go command: GOROOT's when set, otherwise "go" on PATH, where
// go test puts its own GOROOT/bin first.
func goBin() string {
	if goroot := os.Getenv("GOROOT"); goroot != "" {
		if p, err := exec.LookPath(filepath.Join(goroot, "bin", "go")); err == nil {
			return p
		}
	}
	return "go"
}

// TestSnippetsCompile builds and vets every ```go block of snippetDocs as
// a program, as the comment at the top of this file describes.
func TestSnippetsCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every snippet in a module of its own")
	}
	var all []snippet
	for _, doc := range snippetDocs {
		data, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		s, bad := extractSnippets(doc, string(data))
		for _, b := range bad {
			t.Error(b)
		}
		all = append(all, s...)
	}
	if len(all) == 0 {
		t.Fatalf("no ```go block in %v: the extraction is wrong", snippetDocs)
	}

	mods := repoModules(t)
	need := map[string]bool{modulePath: true}
	tmp := t.TempDir()
	fset := token.NewFileSet()
	for _, s := range all {
		docPath, err := filepath.Abs(filepath.Join(root, s.doc))
		if err != nil {
			t.Fatal(err)
		}
		src := s.source(docPath)
		dir := filepath.Join(tmp, strings.NewReplacer("/", "_", ".", "_").Replace(s.doc)+"_"+strconv.Itoa(s.line))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, "", src, parser.ImportsOnly)
		if err != nil {
			continue // the build reports it, at the doc's line
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if m := owningModule(mods, p); m != "" {
				need[m] = true
			}
		}
	}

	goMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go[ \t]+\S+`).Find(goMod)
	if goLine == nil {
		t.Fatal("the root go.mod has no go line")
	}
	var mod, sum strings.Builder
	fmt.Fprintf(&mod, "module gotry.test/snippets\n\n%s\n\n", goLine)
	for _, p := range slices.Sorted(maps.Keys(mods)) {
		if need[p] {
			fmt.Fprintf(&mod, "require %s v0.0.0-00010101000000-000000000000\n", p)
			if data, err := os.ReadFile(filepath.Join(mods[p], "go.sum")); err == nil {
				sum.Write(data)
			}
		}
		fmt.Fprintf(&mod, "replace %s => %s\n", p, mods[p])
	}
	for name, data := range map[string]string{"go.mod": mod.String(), "go.sum": sum.String()} {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	env := append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"), "GOWORK=off")
	for _, args := range [][]string{{"build", "./..."}, {"vet", "./..."}} {
		cmd := exec.Command(goBin(), args...)
		cmd.Dir, cmd.Env = tmp, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s of the snippets of %v: %v\n%s\ngo.mod:\n%s", strings.Join(args, " "), snippetDocs, err, out, mod.String())
		}
	}
	t.Logf("built and vetted %d snippets", len(all))
}

// TestSnippetConventions pins how blocks are told apart and wrapped: the
// three forms, the imports a wrapped block gets, and each way of breaking
// the conventions.
func TestSnippetConventions(t *testing.T) {
	doc := strings.Join([]string{
		"# A doc",                       // 1
		"",                              // 2
		"```go",                         // 3
		"// Command x.",                 // 4
		"package main",                  // 5
		"",                              // 6
		"func main() {}",                // 7
		"```",                           // 8
		"<!-- snippet: body -->",        // 9
		"",                              // 10
		"```go",                         // 11
		`import "example.com/lib"`,      // 12
		"",                              // 13
		"ctx := context.Background()",   // 14
		"lib.Do(ctx, time.Second)",      // 15
		"```",                           // 16
		"  <!-- snippet: decls -->",     // 17
		"  ```go",                       // 18
		"  var c = &http.Client{}",      // 19
		"  func log() {}",               // 20
		"  func use() { log(); _ = c }", // 21
		"  ```",                         // 22
		"```sh",                         // 23
		"<!-- snippet: body -->",        // 24: inside another language's block
		"```",                           // 25
		"```go",                         // 26
		"x := 1",                        // 27
		"```",                           // 28
		"<!-- snippet: nonsense -->",    // 29
		"```go",                         // 30
		"```",                           // 31
		"<!-- snippet: body -->",        // 32
		"Some prose.",                   // 33
		"```go",                         // 34
		"x := 1",                        // 35
	}, "\n")
	got, bad := extractSnippets("doc.md", doc)

	wantForms := []struct {
		line int
		form string
	}{{4, formFile}, {12, formBody}, {19, formDecls}}
	if len(got) != len(wantForms) {
		t.Fatalf("got %d snippets, want %d: %+v", len(got), len(wantForms), got)
	}
	for i, w := range wantForms {
		if got[i].line != w.line || got[i].form != w.form {
			t.Errorf("snippet %d: line %d form %q, want line %d form %q", i, got[i].line, got[i].form, w.line, w.form)
		}
	}
	wantBad := []string{
		"doc.md:26: a ```go block that is neither a file",
		`doc.md:29: unknown snippet form "nonsense"`,
		"doc.md:32: a snippet marker that no ```go block follows",
		"doc.md:34: a ```go block that is never closed",
	}
	if len(bad) != len(wantBad) {
		t.Fatalf("got problems %q, want %d", bad, len(wantBad))
	}
	for i, w := range wantBad {
		if !strings.HasPrefix(bad[i], w) {
			t.Errorf("problem %d: %q, want it to start %q", i, bad[i], w)
		}
	}

	sources := []struct {
		name     string
		src      string
		contains []string
		lacks    []string
	}{
		{"file as it is", got[0].source("doc.md"), []string{"//line doc.md:4\n// Command x.\npackage main\n"}, []string{"import"}},
		{"body in main, its imports hoisted, the standard library added", got[1].source("doc.md"),
			[]string{"package main\n\nimport (\n\t\"context\"\n\t\"time\"\n)\n", "//line doc.md:12\nimport \"example.com/lib\"\n",
				"func main() {\n//line doc.md:13\n\nctx := context.Background()\n"},
			nil},
		{"decls in the package, an empty main, a name of its own not imported", got[2].source("doc.md"),
			[]string{"\t\"net/http\"\n", "//line doc.md:19\nvar c = &http.Client{}\n", "func main() {}\n"}, []string{`"log"`}},
	}
	for _, s := range sources {
		for _, c := range s.contains {
			if !strings.Contains(s.src, c) {
				t.Errorf("%s: source lacks %q:\n%s", s.name, c, s.src)
			}
		}
		for _, c := range s.lacks {
			if strings.Contains(s.src, c) {
				t.Errorf("%s: source has %q:\n%s", s.name, c, s.src)
			}
		}
	}
}
