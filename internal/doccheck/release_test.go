package doccheck

import (
	"go/ast"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
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
	// gotryRequirement is a go.mod requirement on a module of this
	// repository, in a require block or on its own line.
	gotryRequirement = regexp.MustCompile(`(?m)^(?:require)?\s+(github\.com/MrVSiK/gotry(?:/\S+)?)\s+(v\S+)`)
)

// harnesses are the directories whose modules are not released: nothing
// requires them, and they build on the working tree (CONTRIBUTING.md,
// Modules).
var harnesses = []string{"bench", "cmd", "examples", "internal", "realstack", "tools"}

// TestReleaseVersionsAgree holds the version users see in four places to
// one: the latest release section of CHANGELOG.md (the first after
// [Unreleased]), the telemetry.Version constant that every span and metric
// carries as its scope version, what METRICS.md says that version is, and
// the version at which each released module (telemetry, promexport, ...)
// requires the others: tagged on the same commit, telemetry/vX.Y.Z then
// requires the vX.Y.Z beside it. In the working tree go.work and the
// replace directives build them against the tree instead, so nothing else
// would notice a stale requirement before a user did.
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

	requirements := 0
	for mod, reqs := range releasedRequirements(t) {
		for path, v := range reqs {
			requirements++
			if v != latest {
				t.Errorf("%s requires %s %s, CHANGELOG.md's latest release is %s: a release sets both", mod, path, v, latest)
			}
		}
	}
	if requirements == 0 {
		t.Error("no released module requires another of this repository: telemetry/go.mod was not read")
	}
}

// releasedRequirements returns, for the go.mod of every released module
// (every one outside the harnesses), its requirements on modules of this
// repository: module path to version.
func releasedRequirements(t *testing.T) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for dir, data := range goModFiles(t) {
		if top, _, _ := strings.Cut(dir, "/"); slices.Contains(harnesses, top) {
			continue
		}
		reqs := map[string]string{}
		for _, m := range gotryRequirement.FindAllStringSubmatch(string(data), -1) {
			reqs[m[1]] = m[2]
		}
		out[path.Join(dir, "go.mod")] = reqs
	}
	return out
}

// telemetryVersion returns the value of package telemetry's Version
// constant, read from its source (so the test holds whichever module the
// package is in).
func telemetryVersion(t *testing.T) string {
	t.Helper()
	for _, file := range parseSources(t, filepath.Join(root, "telemetry")) {
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
						t.Fatal("package telemetry's Version is not a string literal")
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
