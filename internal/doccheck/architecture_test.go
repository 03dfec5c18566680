package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// listedPackages must appear in ARCHITECTURE.md's file list: the core,
// whose files a reader finds a behaviour by. Other packages may be added
// to the list; each one listed is then held to it the same way.
var listedPackages = []string{"resilience", "transport"}

// listedFile is a row of ARCHITECTURE.md's file list: a code span that is
// exactly a path to a Go file.
var listedFile = regexp.MustCompile("`([\\w-]+(?:/[\\w.-]+)*/[\\w.-]+\\.go)`")

// TestArchitectureListsEveryFile fails when ARCHITECTURE.md's "Files"
// section misses a non-test Go file of a package it lists, or names a Go
// file that is not there (renamed, moved, removed, or a test). Its message
// says which rows to add and which to remove, so that a change that adds,
// renames or removes a file of the core updates the list in the same
// commit.
func TestArchitectureListsEveryFile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	section, ok := mdSection(string(data), "## Files")
	if !ok {
		t.Fatal(`ARCHITECTURE.md has no "## Files" section`)
	}
	listed := map[string]bool{}
	dirs := map[string]bool{}
	for _, m := range listedFile.FindAllStringSubmatch(section, -1) {
		listed[m[1]] = true
		dirs[filepath.ToSlash(filepath.Dir(m[1]))] = true
	}
	for _, p := range listedPackages {
		dirs[p] = true
	}
	var add, remove []string
	for dir := range dirs {
		for _, f := range goFiles(t, dir) {
			if !listed[f] {
				add = append(add, f)
			}
		}
	}
	for f := range listed {
		if strings.HasSuffix(f, "_test.go") || !exists(filepath.Join(root, f)) {
			remove = append(remove, f)
		}
	}
	slices.Sort(add)
	slices.Sort(remove)
	if len(add) > 0 {
		t.Errorf("ARCHITECTURE.md's file list (## Files) misses %d file(s); add a row for each:\n\t%s",
			len(add), strings.Join(add, "\n\t"))
	}
	if len(remove) > 0 {
		t.Errorf("ARCHITECTURE.md's file list (## Files) names %d file(s) that are not non-test Go files of the repository; remove (or rename) their rows:\n\t%s",
			len(remove), strings.Join(remove, "\n\t"))
	}
}

// goFiles returns the non-test Go files of the package in dir (relative
// to root), as slash-separated paths relative to root.
func goFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	for _, p := range goSources(t, filepath.Join(root, dir)) {
		files = append(files, dir+"/"+filepath.Base(p))
	}
	return files
}

// mdSection returns the text of the Markdown section that starts with
// the line heading, up to the next heading of the same or a higher level.
func mdSection(doc, heading string) (string, bool) {
	level := strings.IndexByte(heading, ' ')
	start := -1
	lines := strings.Split(doc, "\n")
	inFence := false
	for i, l := range lines {
		if strings.HasPrefix(l, "```") {
			inFence = !inFence
		}
		if inFence {
			continue
		}
		if start < 0 {
			if l == heading {
				start = i + 1
			}
			continue
		}
		if n := len(l) - len(strings.TrimLeft(l, "#")); n > 0 && n <= level && strings.HasPrefix(l[n:], " ") {
			return strings.Join(lines[start:i], "\n"), true
		}
	}
	if start < 0 {
		return "", false
	}
	return strings.Join(lines[start:], "\n"), true
}
