package depcheck

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// rootModule is the module path of the root module: the core, whose go.mod
// requires nothing a program importing it would build.
const rootModule = "github.com/MrVSiK/gotry"

// TestWhatAUserDownloads holds issue #35's promise from where a user stands:
// a module of their own outside this repository (GOWORK=off) that imports
// gotry's packages, with gotry and telemetry replaced by the working tree,
// tidied, then go list -m all. Every module on that list takes part in
// minimum version selection, so one that gotry does not need would
// silently upgrade the user's own copy. A program of the core gets only
// gotry and the two modules its tests use (goleak and rapid, neither of
// which requires anything a user's build reads); one of telemetry gets
// OpenTelemetry and zap, and nothing of gRPC, protobuf, the OTLP
// exporters or Prometheus, which telemetry does not import (the recipe
// that needs the Prometheus exporter is promexport, and telemetry's tests
// that need an exporter live there and in internal/sdktest); one of
// promexport gets the Prometheus client and exporter, with protobuf, and
// still nothing of gRPC or OTLP. One of an SDK adapter (contrib/awssdk,
// contrib/kubernetes) gets its SDK's modules, those its tests need
// included, and nothing of telemetry, OpenTelemetry, zap, testify or the
// other SDK.
//
// It needs the modules on the lists: from the module cache, else from
// GOPROXY. The temporary module's go.sum starts from the go.sum files of
// the modules it requires, so no checksum is looked up that those do not
// hold.
func TestWhatAUserDownloads(t *testing.T) {
	tests := []struct {
		name    string
		imports []string // packages of this repository the user's program imports
		only    []string // if set, the build list has these modules and no others
		must    []string // modules the build list must have
		mustNot []string // path prefixes no module on the build list may have
	}{
		{
			name:    "core",
			imports: []string{"transport", "resilience", "clock"},
			only:    []string{rootModule, "go.uber.org/goleak", "pgregory.net/rapid"},
		},
		{
			name:    "telemetry",
			imports: []string{"transport", "telemetry"},
			must:    []string{rootModule, rootModule + "/telemetry", "go.opentelemetry.io/otel", "go.uber.org/zap"},
			mustNot: []string{
				"google.golang.org/",                  // gRPC, protobuf, genproto
				"github.com/grpc-ecosystem/",          // grpc-gateway
				"go.opentelemetry.io/otel/exporters/", // OTLP and Prometheus exporters
				"go.opentelemetry.io/proto/",          // OTLP's protobuf types
				"github.com/prometheus/",
				rootModule + "/cmd/",
				rootModule + "/internal/",
				rootModule + "/telemetry/promexport",
			},
		},
		{
			// The adapters' packages import little (awssdk the SDK's core
			// module, kubernetes nothing but gotry); their tests' modules
			// (gofakes3, the S3 client; client-go) reach the list, but
			// nothing of telemetry, of the other SDK or testify.
			name:    "awssdk",
			imports: []string{"contrib/awssdk"},
			must:    []string{rootModule, rootModule + "/contrib/awssdk", "github.com/aws/aws-sdk-go-v2"},
			mustNot: []string{
				rootModule + "/telemetry",
				"go.opentelemetry.io/",
				"go.uber.org/zap",
				"github.com/stretchr/testify",
				"k8s.io/",
				rootModule + "/contrib/kubernetes",
				rootModule + "/cmd/",
				rootModule + "/internal/",
			},
		},
		{
			name:    "kubernetes",
			imports: []string{"contrib/kubernetes"},
			must:    []string{rootModule, rootModule + "/contrib/kubernetes"},
			mustNot: []string{
				rootModule + "/telemetry",
				"go.opentelemetry.io/",
				"go.uber.org/zap",
				"github.com/stretchr/testify",
				"github.com/aws/",
				"github.com/johannesboyne/",
				rootModule + "/contrib/awssdk",
				rootModule + "/cmd/",
				rootModule + "/internal/",
			},
		},
		{
			name:    "promexport",
			imports: []string{"transport", "telemetry", "telemetry/promexport"},
			must:    []string{rootModule + "/telemetry/promexport", "github.com/prometheus/client_golang", "go.opentelemetry.io/otel/exporters/prometheus"},
			mustNot: []string{
				"google.golang.org/grpc",
				"google.golang.org/genproto",
				"github.com/grpc-ecosystem/",
				"go.opentelemetry.io/otel/exporters/otlp/",
				"go.opentelemetry.io/proto/",
				rootModule + "/cmd/",
				rootModule + "/internal/",
			},
		},
	}
	repo := root(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			list := userBuildList(t, repo, tt.imports)
			t.Logf("go list -m all of a module importing %v: %d modules\n%s", tt.imports, len(list), strings.Join(list, "\n"))
			const user = "example.com/user"
			if tt.only != nil {
				want := append([]string{user}, tt.only...)
				for _, m := range list {
					if !slices.Contains(want, m) {
						t.Errorf("%s is on the build list; a program of the core should get only %v", m, want)
					}
				}
			}
			for _, m := range tt.must {
				if !slices.Contains(list, m) {
					t.Errorf("%s is not on the build list", m)
				}
			}
			for _, m := range list {
				for _, p := range tt.mustNot {
					if strings.HasPrefix(m, p) {
						t.Errorf("%s is on the build list; nothing under %s should be", m, p)
					}
				}
			}
		})
	}
}

// userBuildList makes a module example.com/user in a temporary directory,
// whose main package imports pkgs (paths below this repository's root),
// requiring gotry, telemetry and promexport, and the adapter modules under
// contrib/ that pkgs name, replaced by repo's directories, runs go mod tidy
// in it and returns go list -m all, one module path an entry, the user's
// first.
func userBuildList(t *testing.T, repo string, pkgs []string) []string {
	t.Helper()
	dir := t.TempDir()
	var gomod, main strings.Builder
	gomod.WriteString("module example.com/user\n\ngo 1.26.0\n\n")
	main.WriteString("package main\n\nimport (\n")
	for _, p := range pkgs {
		main.WriteString("\t_ \"" + rootModule + "/" + p + "\"\n")
	}
	main.WriteString(")\n\nfunc main() {}\n")
	// Replaced at every version: whatever version the nested modules
	// require resolves to the working tree.
	modules := []string{"", "/telemetry", "/telemetry/promexport"}
	for _, p := range pkgs {
		// contrib/NAME/... is in the module contrib/NAME.
		if parts := strings.Split(p, "/"); parts[0] == "contrib" && len(parts) > 1 {
			if m := "/contrib/" + parts[1]; !slices.Contains(modules, m) {
				modules = append(modules, m)
			}
		}
	}
	for _, m := range modules {
		gomod.WriteString("replace " + rootModule + m + " => " + filepath.Join(repo, filepath.FromSlash(m)) + "\n")
		gomod.WriteString("require " + rootModule + m + " v0.0.0-00010101000000-000000000000\n")
	}
	var sums []byte
	for _, m := range modules {
		b, err := os.ReadFile(filepath.Join(repo, filepath.FromSlash(m), "go.sum"))
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, b...)
	}
	for name, data := range map[string][]byte{"go.mod": []byte(gomod.String()), "main.go": []byte(main.String()), "go.sum": sums} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) []byte {
		cmd := exec.Command(gobin(), args...)
		cmd.Dir = dir
		// As a user builds: no workspace, and go.mod and go.sum may be
		// updated; GOPROXY, GOTOOLCHAIN and the module cache are the
		// caller's.
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.Output()
		if err != nil {
			msg := ""
			if ee, ok := err.(*exec.ExitError); ok {
				msg = string(ee.Stderr)
			}
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, msg)
		}
		return out
	}
	run("mod", "tidy")
	return strings.Fields(string(run("list", "-m", "-f", "{{.Path}}", "all")))
}

// TestNoOtherModuleImportsTheRootsInternals: Go's internal rule goes by
// import path, so the compiler lets github.com/MrVSiK/gotry/telemetry,
// promexport, the demo or internal/sdktest import the root module's
// internal packages
// although they are modules of their own. A released telemetry doing so
// would build only against the root versions whose internal API it was
// written for; the other modules use the public packages (clock.NewFake
// for internal/clock/fakeclock, clock for internal/clock). Test files
// count too, and so do the modules outside go.work, the released SDK
// adapters under contrib/ among them.
func TestNoOtherModuleImportsTheRootsInternals(t *testing.T) {
	var rootInternal []string
	for _, line := range strings.Split(strings.TrimSpace(string(goList(t, "-f", "{{.ImportPath}} {{.Module.Path}}", rootModule+"/internal/..."))), "\n") {
		if pkg, mod, _ := strings.Cut(line, " "); mod == rootModule {
			rootInternal = append(rootInternal, pkg)
		}
	}
	if !slices.Contains(rootInternal, rootModule+"/internal/clock") {
		t.Fatalf("go list did not find the root's internal packages: %v", rootInternal)
	}
	var patterns []string
	for _, m := range strings.Fields(string(goList(t, "-m"))) {
		if m != rootModule {
			patterns = append(patterns, m+"/...")
		}
	}
	out := goList(t, append([]string{"-f", "{{.ImportPath}} {{join .Imports \" \"}} {{join .TestImports \" \"}} {{join .XTestImports \" \"}}"}, patterns...)...)
	checked := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		checked[fields[0]] = true
		for _, imp := range fields[1:] {
			if slices.Contains(rootInternal, imp) {
				t.Errorf("%s imports %s, an internal package of the root module", fields[0], imp)
			}
		}
	}
	for _, p := range []string{"telemetry", "telemetry/promexport", "cmd/gotry-demo", "cmd/gotry-demo/internal/demo", "internal/sdktest"} {
		if !checked[rootModule+"/"+p] {
			t.Errorf("go list did not check %s; modules: %v", p, patterns)
		}
	}

	// The modules outside go.work (the SDK adapters under contrib/, which
	// are released, and the harnesses) are out of go list's reach from
	// here: their imports are read from their source.
	workspace := map[string]bool{}
	for _, dir := range strings.Split(strings.TrimSpace(string(goList(t, "-m", "-f", "{{.Dir}}"))), "\n") {
		workspace[filepath.Clean(dir)] = true
	}
	repo := root(t)
	parsed := map[string]bool{} // directories, relative to repo
	err := filepath.WalkDir(repo, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "go.mod" || workspace[filepath.Dir(path)] {
			return nil
		}
		return filepath.WalkDir(filepath.Dir(path), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") {
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(repo, path)
			parsed[filepath.ToSlash(filepath.Dir(rel))] = true
			for _, imp := range f.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); slices.Contains(rootInternal, p) {
					t.Errorf("%s imports %s, an internal package of the root module", filepath.ToSlash(rel), p)
				}
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"contrib/awssdk", "contrib/kubernetes"} {
		if !parsed[dir] {
			t.Errorf("the Go files of %s, a module outside go.work, were not read", dir)
		}
	}
}
