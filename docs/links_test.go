// Package docs holds the documentation pages (README.md at the repository
// root is the way in). Its one test file keeps every pointer into them
// true: a renamed heading or a moved page fails the test, not a reader.
package docs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// root is the repository, one folder up from this package.
const root = ".."

// checked says whether a file of the repository is read for links: source,
// SQL, markdown, the scripts and the unit file. Data files (testdata's CSVs,
// golden files, node_modules) are not.
func checked(rel string) bool {
	switch path.Ext(rel) {
	case ".go", ".js", ".mjs", ".html", ".css", ".sql", ".md", ".sh", ".service", ".txt":
		return true
	}
	return strings.HasPrefix(rel, ".ci/") || strings.HasPrefix(rel, "scripts/")
}

// repoFiles lists the files checked, as slash paths relative to the root.
func repoFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testout", "dist":
				return filepath.SkipDir
			}
			return nil
		}
		if checked(rel) {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("got no files under the repository root")
	}
	return files
}

var (
	// mdLink is a markdown link or image: [text](target).
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// docRef is a reference by path from the root, as code comments write
	// them: docs/storage.md#event-bytes, README.md#set-up.
	docRef = regexp.MustCompile(`(?:^|[^\w./-])((?:docs/[\w.-]+\.md|README\.md)(?:#[\w-]+)?)`)
	// heading is an ATX heading of a markdown page.
	heading = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	// inlineLink is a link inside a heading's text, shown as its text.
	inlineLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// anchorOf is the anchor GitHub gives a heading: its text without markup,
// lower case, every character but letters, digits, '-', '_' and spaces
// dropped, spaces made '-'.
func anchorOf(text string) string {
	text = inlineLink.ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// page is what a markdown file offers and holds: its anchors, and each
// line outside code blocks (links in code blocks are examples, not links).
type page struct {
	anchors map[string]bool
	prose   map[int]string // line number (from 1) -> line, outside fences
}

func readPage(t *testing.T, rel string) page {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	p := page{anchors: map[string]bool{}, prose: map[int]string{}}
	seen := map[string]int{}
	fence := ""
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		p.prose[n] = line
		if m := heading.FindStringSubmatch(line); m != nil {
			a := anchorOf(m[1])
			if k := seen[a]; k > 0 {
				p.anchors[fmt.Sprintf("%s-%d", a, k)] = true
			} else {
				p.anchors[a] = true
			}
			seen[a]++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	return p
}

// withoutCode drops inline code spans, whose brackets are not links.
func withoutCode(line string) string {
	parts := strings.Split(line, "`")
	var b strings.Builder
	for i := 0; i < len(parts); i += 2 {
		b.WriteString(parts[i])
	}
	return b.String()
}

// TestLinks fails on a link that names a file or an anchor that does not
// exist: markdown links in README.md and the docs pages, and docs/<page>.md
// (or README.md) references, with or without #anchor, in every source
// file, SQL file, script and page. It also fails on a README mention that
// is not such a link (the old citations by section title, such as
// (README "Storage", "On PostgreSQL"), which break silently when a heading
// is renamed); CHANGELOG.md keeps the history it was written with.
func TestLinks(t *testing.T) {
	files := repoFiles(t)
	pages := map[string]page{}
	pageOf := func(rel string) (page, bool) {
		if p, ok := pages[rel]; ok {
			return p, true
		}
		if path.Ext(rel) != ".md" {
			return page{}, false
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel))); err != nil {
			return page{}, false
		}
		pages[rel] = readPage(t, rel)
		return pages[rel], true
	}
	// target checks one link to rel (a slash path from the root) and anchor,
	// once per place (a markdown link into docs/ is also a reference by path).
	done := map[string]bool{}
	target := func(where, link, rel, anchor string) {
		if done[where+" "+rel+"#"+anchor] {
			return
		}
		done[where+" "+rel+"#"+anchor] = true
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel))); err != nil {
			t.Errorf("%s: link %q: got no file %s, want an existing one", where, link, rel)
			return
		}
		if anchor == "" {
			return
		}
		p, ok := pageOf(rel)
		if !ok {
			t.Errorf("%s: link %q: got an anchor into %s, want anchors only into markdown pages", where, link, rel)
			return
		}
		if !p.anchors[anchor] {
			t.Errorf("%s: link %q: got no heading with anchor #%s in %s", where, link, anchor, rel)
		}
	}
	readme := "READ" + "ME" // spelled apart, so that this file does not cite it
	links := 0
	for _, rel := range files {
		text, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(text), "\n")
		for i, line := range lines {
			where := fmt.Sprintf("%s:%d", rel, i+1)
			for _, m := range docRef.FindAllStringSubmatch(line, -1) {
				file, anchor, _ := strings.Cut(m[1], "#")
				target(where, m[1], file, anchor)
				links++
			}
			// CHANGELOG.md keeps its history; this file names what it looks for.
			if rel == "CHANGELOG.md" || rel == "docs/links_test.go" {
				continue
			}
			for rest := line; ; {
				k := strings.Index(rest, readme)
				if k < 0 {
					break
				}
				rest = rest[k+len(readme):]
				if !strings.HasPrefix(rest, ".md") {
					t.Errorf("%s: got %q, want a link to the page and heading meant, such as docs/storage.md#event-bytes or README.md#set-up", where, strings.TrimSpace(line))
					break
				}
			}
		}
		if path.Ext(rel) != ".md" {
			continue
		}
		p, _ := pageOf(rel)
		for n, line := range p.prose {
			for _, m := range mdLink.FindAllStringSubmatch(withoutCode(line), -1) {
				link := m[1]
				if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
					continue
				}
				where := fmt.Sprintf("%s:%d", rel, n)
				file, anchor, _ := strings.Cut(link, "#")
				if file == "" {
					file = rel
				} else {
					file = path.Join(path.Dir(rel), file)
				}
				target(where, link, file, anchor)
				links++
			}
		}
	}
	if links < 100 {
		t.Errorf("got %d links checked, want the hundreds the pages and comments hold", links)
	}
}

// README.md stays a way in: what Tally is, the set-up, a quick start and
// the table of contents; everything else is a page of docs/.
func TestReadmeIsShort(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(root, "READ"+"ME.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(text, []byte("\n")); n > 600 {
		t.Errorf("got README.md of %d lines, want at most 600: move the new text to its page in docs/", n)
	}
}
