// Package doccheck holds the tests that keep the project's docs honest:
// the Markdown docs name code that exists (the tests, benchmarks and
// examples a doc cites as holding a promise, the files it points at, and
// the exported names and members of this module's packages it mentions;
// this file), ARCHITECTURE.md lists every file of the core
// (architecture_test.go), BENCHMARKS.md stays a report and every link
// to a doc's heading finds it (benchmarks_test.go), the README's Go
// snippets compile (snippets_test.go), and no Go file of the repository
// marks a name deprecated (deprecated_test.go).
package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository root, seen from this package's directory (where
// go test runs it).
var root = filepath.Join("..", "..")

// docs are the Markdown files a reader goes to, relative to root.
var docs = []string{
	"README.md",
	"ARCHITECTURE.md",
	"CONTRIBUTING.md",
	"MIGRATING.md",
	"CHANGELOG.md",
	"BENCHMARKS.md",
	"telemetry/README.md",
	"telemetry/METRICS.md",
	"cmd/gotry-demo/README.md",
	"dashboards/README.md",
	"examples/otel-collector/README.md",
	"tools/README.md",
}

// modulePackages maps the name a doc qualifies an identifier with to the
// package's directory. Only these qualifiers are checked: others (http,
// otelhttp, ...) are not this repository's. kubernetes is the adapter of
// contrib/kubernetes: a doc that names client-go's clientset package
// (k8s.io/client-go/kubernetes) qualifies it otherwise, e.g. clientset.
var modulePackages = map[string]string{
	"transport":     "transport",
	"transporttest": "transport/transporttest",
	"resilience":    "resilience",
	"telemetry":     "telemetry",
	"promexport":    "telemetry/promexport",
	"clock":         "clock",
	"schedule":      "resilience/schedule",
	"periodic":      "resilience/periodic",
	"cache":         "resilience/cache",
	"dnscache":      "resilience/dnscache",
	"dashboards":    "dashboards",
	"awssdk":        "contrib/awssdk",
	"kubernetes":    "contrib/kubernetes",
}

var (
	// codeSpan is one inline code span of Markdown; fenced blocks are cut
	// first (they hold examples with local names).
	codeSpan = regexp.MustCompile("`([^`\n]+)`")
	fence    = regexp.MustCompile("(?s)```.*?```")
	// testName is a span that is exactly one test, benchmark, fuzz target
	// or example name (a command's -run pattern is not).
	testName = regexp.MustCompile(`^(?:Test|Benchmark|Fuzz|Example)\w*$`)
	// repoPath is a span that is exactly a path to a source or doc file.
	repoPath = regexp.MustCompile(`^[\w-]+(?:/[\w.-]+)+\.(?:go|md|yml|yaml|sh|json)$`)
	// qualified is pkg.Name or pkg.Type.Member inside a span.
	qualified = regexp.MustCompile(`(?:^|[^\w.])([a-z]\w*)\.([A-Z]\w*)(?:\.([A-Z]\w*))?\b`)
	// member is Type.Member inside a span, not qualified by a package.
	member = regexp.MustCompile(`(?:^|[^\w.])([A-Z]\w*)\.([A-Z]\w*)\b`)
)

// TestDocsNameCodeThatExists fails if a doc names, in a code span, a test
// that no _test.go file declares, a file that is not in the repository, an
// exported name that its package of this module does not declare, or a
// member (method or field) that a type of this module does not have. A
// renamed test, a moved file or a removed method then shows up here rather
// than in a reader's search.
func TestDocsNameCodeThatExists(t *testing.T) {
	tests := declaredTests(t)
	pkgs := map[string]*pkgDecls{}
	for name, dir := range modulePackages {
		pkgs[name] = declared(t, filepath.Join(root, dir))
	}
	for _, doc := range docs {
		data, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		text := fence.ReplaceAllString(string(data), "")
		for _, m := range codeSpan.FindAllStringSubmatch(text, -1) {
			span := strings.TrimSuffix(m[1], "()")
			switch {
			case testName.MatchString(span):
				if !tests[span] {
					t.Errorf("%s names %s, which no _test.go file declares", doc, span)
				}
				continue
			case repoPath.MatchString(span):
				if !exists(filepath.Join(root, span)) && !exists(filepath.Join(root, filepath.Dir(doc), span)) {
					t.Errorf("%s names %s, which is not in the repository", doc, span)
				}
				continue
			}
			for _, q := range qualified.FindAllStringSubmatch(span, -1) {
				p, ok := pkgs[q[1]]
				if !ok {
					continue
				}
				if !p.names[q[2]] {
					t.Errorf("%s names %s.%s, which package %s does not declare", doc, q[1], q[2], q[1])
				} else if q[3] != "" && p.types[q[2]] != nil && !p.has(q[2], q[3]) {
					t.Errorf("%s names %s.%s.%s; %s.%s has no such method or field", doc, q[1], q[2], q[3], q[1], q[2])
				}
			}
			for _, q := range member.FindAllStringSubmatch(span, -1) {
				if !anyTypeHas(pkgs, q[1], q[2]) {
					t.Errorf("%s names %s.%s; no type %s of this module has such a method or field", doc, q[1], q[2], q[1])
				}
			}
		}
	}
}

// anyTypeHas reports whether typ, if some package of the module declares
// it, has member there; a name no package declares as a type (an http type,
// a field path) passes.
func anyTypeHas(pkgs map[string]*pkgDecls, typ, member string) bool {
	found := false
	for _, p := range pkgs {
		if p.types[typ] == nil {
			continue
		}
		found = true
		if p.has(typ, member) {
			return true
		}
	}
	return !found
}

// pkgDecls is what one package declares outside its tests.
type pkgDecls struct {
	names map[string]bool            // top-level names
	types map[string]map[string]bool // type → its methods and fields
	embed map[string][]string        // type → the types it embeds, in this package
}

// has reports whether typ has member, directly or through an embedded type
// of the same package.
func (p *pkgDecls) has(typ, member string) bool {
	if p.types[typ][member] {
		return true
	}
	for _, e := range p.embed[typ] {
		if e != typ && p.has(e, member) {
			return true
		}
	}
	return false
}

// declared parses dir's non-test Go files.
func declared(t *testing.T, dir string) *pkgDecls {
	t.Helper()
	p := &pkgDecls{names: map[string]bool{}, types: map[string]map[string]bool{}, embed: map[string][]string{}}
	typ := func(name string) map[string]bool {
		if p.types[name] == nil {
			p.types[name] = map[string]bool{}
		}
		return p.types[name]
	}
	for _, file := range parseSources(t, dir) {
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					p.names[d.Name.Name] = true
					continue
				}
				typ(receiverType(d.Recv.List[0].Type))[d.Name.Name] = true
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							p.names[n.Name] = true
						}
					case *ast.TypeSpec:
						p.names[s.Name.Name] = true
						members := typ(s.Name.Name)
						switch u := s.Type.(type) {
						case *ast.StructType:
							for _, f := range u.Fields.List {
								if len(f.Names) == 0 {
									e := receiverType(f.Type)
									members[e] = true
									p.embed[s.Name.Name] = append(p.embed[s.Name.Name], e)
								}
								for _, n := range f.Names {
									members[n.Name] = true
								}
							}
						case *ast.InterfaceType:
							for _, m := range u.Methods.List {
								for _, n := range m.Names {
									members[n.Name] = true
								}
							}
						}
					}
				}
			}
		}
	}
	return p
}

// receiverType returns the name of the type expr denotes, without pointer,
// package qualifier or type parameters.
func receiverType(expr ast.Expr) string {
	switch e := expr.(type) {
	case *ast.StarExpr:
		return receiverType(e.X)
	case *ast.IndexExpr:
		return receiverType(e.X)
	case *ast.IndexListExpr:
		return receiverType(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// declaredTests returns every Test, Benchmark, Fuzz and Example function
// that a _test.go file under root declares, the other modules' included.
func declaredTests(t *testing.T) map[string]bool {
	t.Helper()
	fn := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz|Example)\w*)\(`)
	names := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range fn.FindAllSubmatch(data, -1) {
			names[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !names["TestDocsNameCodeThatExists"] {
		t.Fatal("the walk did not reach this file: the root is wrong")
	}
	return names
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// goSources returns the paths of dir's non-test Go files, failing the
// test when it has none.
func goSources(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			files = append(files, filepath.Join(dir, n))
		}
	}
	if len(files) == 0 {
		t.Fatalf("no non-test Go files in %s", dir)
	}
	return files
}

// parseSources parses dir's non-test Go files.
func parseSources(t *testing.T, dir string) []*ast.File {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	for _, path := range goSources(t, dir) {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}
