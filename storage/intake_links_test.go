package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// undo0017 makes db a database of before migration 0017: identity_links a
// rowid table with created_at as text and its index by user, the links
// in the order they were made, 0017 not applied.
func undo0017(t *testing.T, db *DB) {
	t.Helper()
	execInWriter(t, db,
		`ALTER TABLE identity_links RENAME TO links_0017`,
		`DROP INDEX identity_links_user`,
		strings.Replace(oldLinksLayout, "identity_links_rowid", "identity_links", 1),
		`CREATE INDEX identity_links_site_user ON identity_links(site_id, user_id)`,
		`INSERT INTO identity_links(site_id, anon_id, user_id, created_at)
			SELECT site_id, anon_id, user_id, strftime('%Y-%m-%dT%H:%M:%S', created_at / 1000, 'unixepoch') || printf('.%03dZ', created_at % 1000)
			FROM links_0017 ORDER BY created_at, site_id, anon_id, user_id`,
		`DROP TABLE links_0017`,
		`DELETE FROM schema_migrations WHERE version = 17`)
}

// linkDump is every link of db, in both tables, created_at as text.
func linkDump(t *testing.T, db *DB) string {
	t.Helper()
	rows, err := db.read.Query(`SELECT site_id, anon_id, user_id, created_at FROM ` + db.links().any("") + ` ORDER BY 1, 2, 3`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var site, anon, user string
		var created any
		if err := rows.Scan(&site, &anon, &user, &created); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&b, site, anon, user, linkCreatedText(created))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func oldLinkCount(t *testing.T, db *DB) int {
	t.Helper()
	var n int
	if err := db.read.QueryRow(`SELECT COUNT(*) FROM ` + oldLinksTable).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// linksFixture is eraseFixture's site s (user u on three devices with
// more rows than one transaction erases, visitor v), user w on 30 devices
// of s (also more rows than one transaction erases), and user x on three
// devices of site t.
func linksFixture(t *testing.T, db *DB) {
	t.Helper()
	withSites(t, db, "s", "t")
	f := newEraseFixture(t, db, true)
	w, x := "w", "x"
	for i := range 30 {
		f.send(fmt.Sprintf("e%02d", i), &w, 40+i%3, i == 4)
	}
	at := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
	for i := range 3 {
		url := "https://t.test/"
		ingestAll(t, db, IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-9000-%012d", i), SiteID: "t", Type: "pageview",
			AnonID: fmt.Sprintf("x%d", i), UserID: &x, URL: &url, TS: at, Raw: []byte(`{}`)})
	}
}

// A database of before migration 0017 has its links moved into the new
// table in the background, a chunk per writer job: a restart midway
// resumes with the links not yet moved, each link ends up once with the
// created_at it had, intake meanwhile neither loses nor doubles a link,
// and the next start drops the emptied old table.
func TestMigration0017MovesLinksResumably(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "converts an old SQLite layout")
	path := filepath.Join(t.TempDir(), "a.db")
	db, err := openTestDB(t, context.Background(), Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	linksFixture(t, db)
	want := linkDump(t, db)
	undo0017(t, db)
	db.Close()

	// Two jobs of 7, then the process stops.
	db, err = openTestDB(t, context.Background(), Options{Path: path, linkMoveChunk: -1})
	if err != nil {
		t.Fatal(err)
	}
	total := oldLinkCount(t, db)
	if !db.oldLinks.Load() || total != 36 {
		t.Fatalf("after migrating: got %d old links (move pending %v), want 36 pending", total, db.oldLinks.Load())
	}
	for range 2 {
		if n, done, err := db.moveLinks(context.Background(), 7); err != nil || n != 7 || done {
			t.Fatalf("got a move of %d links (done %v, %v), want 7", n, done, err)
		}
	}
	if got := linkDump(t, db); got != want {
		t.Fatalf("links midway:\n%s\nwant those of before:\n%s", got, want)
	}
	db.Close()

	db, err = openTestDB(t, context.Background(), Options{Path: path, linkMoveChunk: 5})
	if err != nil {
		t.Fatal(err)
	}
	// Intake while the move may run: a link the old table may still hold,
	// and a new one.
	u := "u"
	at := time.Date(2026, 3, 3, 8, 0, 0, 0, time.UTC)
	for i, anon := range []string{"d2", "d7"} {
		url := "https://a.test/"
		ingestAll(t, db, IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-a000-%012d", i), SiteID: "s", Type: "pageview",
			AnonID: anon, UserID: &u, URL: &url, TS: at, Raw: []byte(`{}`)})
	}
	<-db.conv.done
	got := linkDump(t, db)
	var d7 string
	for _, line := range strings.Split(got, "\n") {
		if strings.HasPrefix(line, "s d7 u ") {
			d7 = line + "\n"
		}
	}
	if d7 == "" || strings.Replace(got, d7, "", 1) != want {
		t.Fatalf("links after the move:\n%s\nwant those of before and s d7 u:\n%s", got, want)
	}
	if n := oldLinkCount(t, db); n != 0 || db.oldLinks.Load() {
		t.Fatalf("got %d links left in the old table (pending %v), want 0", n, db.oldLinks.Load())
	}
	var text int
	db.read.QueryRow(`SELECT COUNT(*) FROM identity_links WHERE typeof(created_at) != 'integer'`).Scan(&text)
	if text != 0 {
		t.Fatalf("got %d links with created_at not in ms, want 0", text)
	}
	db.Close()

	db = openTest(t, path)
	var old int
	db.read.QueryRow(`SELECT COUNT(*) FROM sqlite_schema WHERE name IN ('identity_links_rowid', 'identity_links_site_user')`).Scan(&old)
	if old != 0 || db.oldLinks.Load() {
		t.Fatalf("after the next start: got %d objects of the old table, want 0", old)
	}
	if again := linkDump(t, db); again != got {
		t.Fatalf("links after the next start:\n%s\nwant those after the move:\n%s", again, got)
	}
}

// While the move runs, with some links in each table, every read of links
// answers what it answers once they are all moved (timeline pages, GDPR
// exports, which anon ids are a subject's), and erasures, a site delete
// and intake leave what they leave on a database whose move is done.
func TestLinksReadAndErasedAlikeDuringTheMove(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "converts an old SQLite layout")
	dir := t.TempDir()
	pathB := filepath.Join(dir, "b.db")
	db, err := openTestDB(t, context.Background(), Options{Path: pathB})
	if err != nil {
		t.Fatal(err)
	}
	linksFixture(t, db)
	undo0017(t, db)
	db.Close()
	if _, err := os.Stat(pathB + "-wal"); err == nil {
		t.Fatal("a WAL after closing")
	}
	if err := copyFile(pathB, filepath.Join(dir, "a.db")); err != nil {
		t.Fatal(err)
	}

	// One clock for both, so that what they store now is alike.
	now := func() time.Time { return time.Date(2026, 3, 10, 8, 0, 0, 0, time.UTC) }
	a, err := openTestDB(t, context.Background(), Options{Path: filepath.Join(dir, "a.db"), Now: now}) // moved at once
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	<-a.conv.done
	b, err := openTestDB(t, context.Background(), Options{Path: pathB, Now: now, linkMoveChunk: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if n, _, err := b.moveLinks(context.Background(), 18); err != nil || n != 18 {
		t.Fatalf("got %d links moved (%v), want 18", n, err)
	}
	if a.oldLinks.Load() || !b.oldLinks.Load() || oldLinkCount(t, b) != 18 {
		t.Fatalf("got move pending %v and %v, want false and true with 18 links left", a.oldLinks.Load(), b.oldLinks.Load())
	}

	ctx := context.Background()
	sys := Actor{Kind: ActorSystem}
	// A link the old table holds, sent again: not stored twice.
	w := "w"
	for _, db := range []*DB{a, b} {
		url := "https://a.test/"
		ingestAll(t, db, IngestEvent{ID: "00000000-0000-4000-b000-000000000002", SiteID: "s", Type: "pageview",
			AnonID: "e29", UserID: &w, URL: &url, TS: time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC), Raw: []byte(`{}`)})
	}
	if n := count(t, b, `SELECT COUNT(*) FROM identity_links WHERE anon_id = 'e29'`); n != 0 {
		t.Fatalf("got %d links of e29 in the new table, want it only in the old one", n)
	}
	reads := func(db *DB) string {
		var out strings.Builder
		for _, user := range []string{"u", "w", "nobody"} {
			var before time.Time
			for page := 0; page < 50; page++ {
				events, next, err := db.Timeline(ctx, "s", user, 100, before)
				fmt.Fprintln(&out, user, len(events), next != nil, err)
				for _, e := range events {
					fmt.Fprintln(&out, e.ID, e.AnonID)
				}
				if next == nil {
					break
				}
				fmt.Fprintln(&out, *next)
				before, _ = time.Parse(timeLayout, *next)
			}
		}
		site, _ := db.Site("s")
		for _, s := range []Subject{{UserID: "u"}, {UserID: "w"}, {AnonID: "e03"}, {AnonID: "v"}} {
			x, err := db.ExportSubject(ctx, sys, site, s)
			if err != nil {
				t.Fatal(err)
			}
			j, _ := json.Marshal(x)
			fmt.Fprintln(&out, string(j))
			ids, err := db.SubjectAnonIDs(ctx, "s", s, []string{"d0", "d1", "e03", "e29", "v", "x0"})
			fmt.Fprintln(&out, ids, err)
		}
		return out.String()
	}
	if got, want := reads(b), reads(a); got != want {
		t.Fatalf("reads during the move differ from those after it: %s", firstDiff(got, want))
	}

	// Writes during the move: an erasure by user (in bounded jobs: more
	// rows than one transaction), one by anon id, a site delete, intake.
	writes := func(db *DB) string {
		var out strings.Builder
		site, _ := db.Site("s")
		// u's links are all in the new table, e25's in the old one, w's
		// in both.
		for _, s := range []Subject{{UserID: "u"}, {AnonID: "e25"}, {UserID: "w"}} {
			c, err := db.EraseSubject(ctx, sys, site, s)
			fmt.Fprintln(&out, c, err)
		}
		tSite, _ := db.Site("t")
		list, err := db.Workspaces(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, ws := range list {
			if ws.ID == tSite.WorkspaceID {
				fmt.Fprintln(&out, db.DeleteSite(ctx, sys, &ws, "t"))
			}
		}
		url := "https://a.test/"
		ingestAll(t, db, IngestEvent{ID: "00000000-0000-4000-b000-000000000001", SiteID: "s", Type: "pageview",
			AnonID: "e05", UserID: &w, URL: &url, TS: time.Date(2026, 3, 4, 8, 0, 0, 0, time.UTC), Raw: []byte(`{}`)})
		return out.String()
	}
	if got, want := writes(b), writes(a); got != want {
		t.Fatalf("erasures during the move:\n%s\nwant those after it:\n%s", got, want)
	}
	if n := count(t, b, `SELECT COUNT(*) FROM `+oldLinksTable+` WHERE site_id = 't' OR user_id = 'w' OR anon_id = 'e25'`); n != 0 {
		t.Fatalf("got %d links of the deleted site and erased subjects left in the old table, want 0", n)
	}
	for done := false; !done; {
		if _, done, err = b.moveLinks(ctx, 1000); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := siteState(t, b), siteState(t, a); got != want {
		t.Fatalf("after erasures during the move:\n%s\nwant those after it:\n%s", got, want)
	}
	if got, want := linkDump(t, b), linkDump(t, a); got != want {
		t.Fatalf("links after erasures during the move:\n%s\nwant those after it:\n%s", got, want)
	}
	if n := count(t, b, `SELECT COUNT(*) FROM identity_links WHERE site_id = 't'`); n != 0 {
		t.Fatalf("got %d links of the deleted site, want 0", n)
	}
}

// firstDiff is the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d: got %.600s, want %.600s", i+1, g[i], w[i])
		}
	}
	return fmt.Sprintf("got %d lines, want %d", len(g), len(w))
}
