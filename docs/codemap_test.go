package docs

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// codeName is a file or folder named in a code map's first column: a
// backticked path ending in .go or a slash.
var codeName = regexp.MustCompile("`([\\w./*-]+(?:\\.go|/))`")

// TestCodeMapNamesFiles fails when docs/architecture.md's code map names a
// file that does not exist (a file renamed or moved without its row), and
// when a source file of storage is named by no row, so that the map stays
// the whole of `ls storage`. A bare name in a row's first column is in the
// folder of the path named before it (a folder's own name, `x/`, is from
// the root); in its text, only paths are checked.
func TestCodeMapNamesFiles(t *testing.T) {
	text, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	where := -1 // the column titled Where of the table read
	for n, line := range strings.Split(string(text), "\n") {
		if !strings.HasPrefix(line, "|") {
			where = -1
			continue
		}
		cells := strings.Split(strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|"), "|")
		if where < 0 {
			for i, c := range cells {
				if strings.TrimSpace(c) == "Where" {
					where = i
				}
			}
			continue
		}
		for i, cell := range cells {
			dir := ""
			text := i != where
			for _, m := range codeName.FindAllStringSubmatch(cell, -1) {
				name := m[1]
				switch {
				case strings.HasSuffix(name, "/"): // a folder, named from the root
					dir = strings.TrimSuffix(name, "/")
				case strings.Contains(name, "/"):
					dir = path.Dir(strings.TrimSuffix(name, "/"))
				case text:
					continue // a bare name in the text may be of any folder
				default:
					name = path.Join(dir, name)
				}
				matches, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(name)))
				if err != nil || len(matches) == 0 {
					t.Errorf("docs/architecture.md:%d: got no file %s, want the row to name existing files", n+1, name)
				}
				for _, m := range matches {
					rel, _ := filepath.Rel(root, m)
					named[filepath.ToSlash(rel)] = true
				}
			}
		}
	}
	files, err := filepath.Glob(filepath.Join(root, "storage", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		rel := "storage/" + filepath.Base(f)
		if strings.HasSuffix(rel, "_test.go") || named[rel] {
			continue
		}
		t.Errorf("got %s named by no row of docs/architecture.md's code map, want a row for it", rel)
	}
}
