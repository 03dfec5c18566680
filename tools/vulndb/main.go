// Command vulndb builds an offline Go vulnerability database in the v1
// layout that govulncheck reads through -db file:///abs/path:
//
//	index/db.json       {"modified": <time>}
//	index/modules.json  [{"path": ..., "vulns": [{"id", "modified", "fixed"}]}]
//	ID/<id>.json        the OSV entry, copied verbatim
//
// Its input is the data/osv directory of the golang.org/x/vulndb module
// (fetched through the Go module proxy by scripts/ensure-vulndb.sh). The
// index is computed the way golang.org/x/vuln v1.9.0 computes it for a flat
// directory of OSV files (internal/client/index.go), so govulncheck sees the
// same data either way; the v1 layout just avoids re-parsing every entry on
// each run.
//
// The OSV files in x/vulndb carry a zero "modified" time (the hosted
// database fills it in from git history). Where an entry's time is zero,
// the index uses -modified instead (the x/vulndb commit time), and
// index/db.json records the latest of those times.
//
// Standard library only.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Only the OSV fields the index needs.
type entry struct {
	ID       string     `json:"id"`
	Modified time.Time  `json:"modified"`
	Affected []affected `json:"affected"`
}

type affected struct {
	Module struct {
		Path string `json:"name"`
	} `json:"package"`
	Ranges []osvRange `json:"ranges"`
}

type osvRange struct {
	Type   string `json:"type"`
	Events []struct {
		Introduced string `json:"introduced,omitempty"`
		Fixed      string `json:"fixed,omitempty"`
	} `json:"events"`
}

type dbMeta struct {
	Modified time.Time `json:"modified"`
}

type moduleMeta struct {
	Path  string       `json:"path"`
	Vulns []moduleVuln `json:"vulns"`
}

type moduleVuln struct {
	ID       string    `json:"id"`
	Modified time.Time `json:"modified"`
	Fixed    string    `json:"fixed,omitempty"`
}

func main() {
	src := flag.String("src", "", "directory of OSV entries (x/vulndb data/osv)")
	out := flag.String("out", "", "output directory (created; must not exist)")
	mod := flag.String("modified", "", "RFC 3339 time used where an entry's modified time is zero")
	flag.Parse()
	if *src == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: vulndb -src DIR -out DIR [-modified TIME]")
		os.Exit(2)
	}
	var fallback time.Time
	if *mod != "" {
		t, err := time.Parse(time.RFC3339, *mod)
		if err != nil {
			fatal(err)
		}
		fallback = t.UTC()
	}
	n, err := build(*src, *out, fallback)
	if err != nil {
		fatal(err)
	}
	fmt.Fprintf(os.Stderr, "vulndb: wrote %d entries to %s\n", n, *out)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "vulndb:", err)
	os.Exit(1)
}

func build(src, out string, fallback time.Time) (int, error) {
	if _, err := os.Stat(out); err == nil {
		return 0, fmt.Errorf("%s already exists", out)
	}
	if err := os.MkdirAll(filepath.Join(out, "ID"), 0o755); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Join(out, "index"), 0o755); err != nil {
		return 0, err
	}
	files, err := filepath.Glob(filepath.Join(src, "*.json"))
	if err != nil {
		return 0, err
	}
	if len(files) == 0 {
		return 0, fmt.Errorf("no OSV entries in %s", src)
	}
	sort.Strings(files)

	db := dbMeta{}
	modules := map[string]*moduleMeta{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		var e entry
		if err := json.Unmarshal(b, &e); err != nil {
			return 0, fmt.Errorf("%s: %w", f, err)
		}
		if e.ID == "" || filepath.Base(f) != e.ID+".json" {
			return 0, fmt.Errorf("%s: file name does not match id %q", f, e.ID)
		}
		modified := e.Modified.UTC()
		if modified.IsZero() {
			modified = fallback
		}
		if modified.After(db.Modified) {
			db.Modified = modified
		}
		for _, a := range e.Affected {
			p := a.Module.Path
			m, ok := modules[p]
			if !ok {
				m = &moduleMeta{Path: p, Vulns: []moduleVuln{}}
				modules[p] = m
			}
			m.Vulns = append(m.Vulns, moduleVuln{ID: e.ID, Modified: modified, Fixed: nonSupersededFix(a.Ranges)})
		}
		if err := os.WriteFile(filepath.Join(out, "ID", e.ID+".json"), b, 0o644); err != nil {
			return 0, err
		}
	}

	list := make([]*moduleMeta, 0, len(modules))
	for _, m := range modules {
		sort.SliceStable(m.Vulns, func(i, j int) bool { return m.Vulns[i].ID < m.Vulns[j].ID })
		list = append(list, m)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Path < list[j].Path })
	if err := writeJSON(filepath.Join(out, "index", "modules.json"), list); err != nil {
		return 0, err
	}
	// db.json last: its presence marks a complete database.
	if err := writeJSON(filepath.Join(out, "index", "db.json"), db); err != nil {
		return 0, err
	}
	return len(files), nil
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// nonSupersededFix mirrors x/vuln internal/semver.NonSupersededFix: the
// latest SEMVER fix, or "" if the vulnerability was reintroduced after it.
func nonSupersededFix(ranges []osvRange) string {
	var latest string
	for _, r := range ranges {
		if r.Type != "SEMVER" {
			continue
		}
		for _, e := range r.Events {
			if e.Fixed != "" && less(latest, e.Fixed) {
				latest = e.Fixed
			}
		}
		for _, e := range r.Events {
			if e.Introduced != "" && e.Introduced != "0" && less(latest, e.Introduced) {
				latest = ""
				break
			}
		}
	}
	return latest
}

// less reports v1 < v2 for versions with a "v", "go" or no prefix, with
// golang.org/x/mod/semver.Compare semantics (an invalid version sorts
// before every valid one).
func less(v1, v2 string) bool { return compare(canon(v1), canon(v2)) < 0 }

func canon(s string) string {
	s = strings.TrimPrefix(s, "v")
	s = strings.TrimPrefix(s, "go")
	return s
}

type parsed struct{ major, minor, patch, pre string }

func compare(v, w string) int {
	pv, errV := parse(v)
	pw, errW := parse(w)
	switch {
	case errV != nil && errW != nil:
		return 0
	case errV != nil:
		return -1
	case errW != nil:
		return 1
	}
	if c := cmpInt(pv.major, pw.major); c != 0 {
		return c
	}
	if c := cmpInt(pv.minor, pw.minor); c != 0 {
		return c
	}
	if c := cmpInt(pv.patch, pw.patch); c != 0 {
		return c
	}
	return cmpPre(pv.pre, pw.pre)
}

var errInvalid = errors.New("invalid semver")

// parse accepts MAJOR[.MINOR[.PATCH[-PRE][+BUILD]]] (shorthands only without
// PRE/BUILD), like x/mod/semver with the "v" already stripped.
func parse(s string) (parsed, error) {
	var p parsed
	core, build, hasBuild := strings.Cut(s, "+")
	if hasBuild && !validIdents(build, false) {
		return p, errInvalid
	}
	core, pre, hasPre := strings.Cut(core, "-")
	if hasPre && !validIdents(pre, true) {
		return p, errInvalid
	}
	parts := strings.Split(core, ".")
	if len(parts) > 3 || (len(parts) < 3 && (hasPre || hasBuild)) {
		return p, errInvalid
	}
	for _, n := range parts {
		if !isNum(n) {
			return p, errInvalid
		}
	}
	p.major, p.minor, p.patch = parts[0], "0", "0"
	if len(parts) > 1 {
		p.minor = parts[1]
	}
	if len(parts) > 2 {
		p.patch = parts[2]
	}
	if hasPre {
		p.pre = "-" + pre
	}
	return p, nil
}

func isNum(s string) bool {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func validIdents(s string, pre bool) bool {
	for _, id := range strings.Split(s, ".") {
		if id == "" {
			return false
		}
		digits := true
		for i := 0; i < len(id); i++ {
			c := id[i]
			switch {
			case c >= '0' && c <= '9':
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-':
				digits = false
			default:
				return false
			}
		}
		if pre && digits && len(id) > 1 && id[0] == '0' {
			return false
		}
	}
	return true
}

func cmpInt(x, y string) int {
	switch {
	case len(x) != len(y):
		if len(x) < len(y) {
			return -1
		}
		return 1
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// cmpPre compares "-a.b" prerelease strings per SemVer 2.0.0; no prerelease
// sorts after any prerelease.
func cmpPre(x, y string) int {
	if x == y {
		return 0
	}
	if x == "" {
		return 1
	}
	if y == "" {
		return -1
	}
	xs, ys := strings.Split(x[1:], "."), strings.Split(y[1:], ".")
	for i := 0; i < len(xs) && i < len(ys); i++ {
		a, b := xs[i], ys[i]
		if a == b {
			continue
		}
		an, bn := isNum(a), isNum(b)
		switch {
		case an && bn:
			return cmpInt(a, b)
		case an:
			return -1
		case bn:
			return 1
		case a < b:
			return -1
		default:
			return 1
		}
	}
	switch {
	case len(xs) < len(ys):
		return -1
	case len(xs) > len(ys):
		return 1
	}
	return 0
}
