package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	// changelogSection is a version's heading in CHANGELOG.md:
	// "## [0.1.0] - 2027-01-31", or "## [Unreleased]".
	changelogSection = regexp.MustCompile(`(?m)^## \[([^\]]+)\]`)
	// changelogLink is a link reference definition at its end:
	// "[0.1.0]: https://...".
	changelogLink = regexp.MustCompile(`(?m)^\[([^\]]+)\]: \S+`)
	semver        = regexp.MustCompile(`^\d+\.\d+\.\d+$`)
	// scopeVersion is the Prometheus label METRICS.md quotes.
	scopeVersion = regexp.MustCompile(`otel_scope_version="([^"]*)"`)
)

// TestReleaseVersionsAgree holds the version users see in three places to
// one: the latest release section of CHANGELOG.md (the first after
// [Unreleased]), the telemetry.Version constant that every span and metric
// carries as its scope version, and what METRICS.md says that version is.
// A release changes all three in the commit it tags (CONTRIBUTING.md,
// Releasing). It also holds CHANGELOG.md's shape: an [Unreleased] section
// first, every version in order once, each with its link reference.
func TestReleaseVersionsAgree(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	changelog := string(data)
	var sections []string
	for _, m := range changelogSection.FindAllStringSubmatch(changelog, -1) {
		sections = append(sections, m[1])
	}
	if len(sections) < 2 || sections[0] != "Unreleased" {
		t.Fatalf("CHANGELOG.md's sections are %q: want [Unreleased] first, then the releases, newest first", sections)
	}
	links := map[string]bool{}
	for _, m := range changelogLink.FindAllStringSubmatch(changelog, -1) {
		links[m[1]] = true
	}
	seen := map[string]bool{}
	for _, s := range sections {
		switch {
		case s != "Unreleased" && !semver.MatchString(s):
			t.Errorf("CHANGELOG.md: section [%s] is not a version X.Y.Z", s)
		case seen[s]:
			t.Errorf("CHANGELOG.md: section [%s] twice", s)
		case !links[s]:
			t.Errorf("CHANGELOG.md: section [%s] has no link reference ([%s]: URL) at the end", s, s)
		}
		seen[s] = true
	}
	latest := "v" + sections[1]

	if v := telemetryVersion(t); v != latest {
		t.Errorf("telemetry.Version is %q, CHANGELOG.md's latest release %q: a release sets both", v, latest)
	}

	metrics, err := os.ReadFile(filepath.Join(root, "telemetry", "METRICS.md"))
	if err != nil {
		t.Fatal(err)
	}
	labels := scopeVersion.FindAllStringSubmatch(string(metrics), -1)
	if len(labels) == 0 {
		t.Error(`telemetry/METRICS.md quotes no otel_scope_version="..." label`)
	}
	for _, m := range labels {
		if m[1] != latest {
			t.Errorf(`telemetry/METRICS.md: otel_scope_version=%q, want %q`, m[1], latest)
		}
	}
	if !strings.Contains(string(metrics), "`telemetry.Version` (`"+latest+"`") {
		t.Errorf("telemetry/METRICS.md does not say that telemetry.Version is `%s`", latest)
	}
}

// telemetryVersion returns the value of package telemetry's Version
// constant, read from its source (so the test holds whichever module the
// package is in).
func telemetryVersion(t *testing.T) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "telemetry", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if n.Name != "Version" || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("%s: telemetry.Version is not a string literal", f)
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					return v
				}
			}
		}
	}
	t.Fatal("package telemetry declares no Version constant")
	return ""
}
