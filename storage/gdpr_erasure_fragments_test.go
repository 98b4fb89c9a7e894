package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// Where a byte of the database file lies, as SQLite's file format divides a
// page: in a live cell, in a page's unused space (the gap between the cell
// pointer array and the cell content, a freeblock, a fragment), on a free
// page, or in the page's header and cell pointers.
const (
	placeCell      = "cell"
	placeOverflow  = "overflow page"
	placeGap       = "gap"
	placeFreeblock = "freeblock"
	placeFragment  = "fragment"
	placeFreePage  = "free page"
	placeHeader    = "page header or cell pointers"
	placeOther     = "other page"
)

// leftover is one occurrence of a value in the database file.
type leftover struct {
	Value string
	Page  int64
	Name  string // the table or index that owns the page, from dbstat
	Place string
}

func (l leftover) String() string {
	return fmt.Sprintf("%s on page %d (%s): %s", l.Value, l.Page, l.Name, l.Place)
}

// findLeftovers returns every occurrence of values in the database file at
// path, with the page it is on and where in the page. The file must be
// checkpointed (db.Space) and nothing may write meanwhile: the page owners
// come from db's dbstat, the bytes from the file.
func findLeftovers(t *testing.T, db *DB, path string, values []string) []leftover {
	t.Helper()
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pageSize := int64(binary.BigEndian.Uint16(file[16:18]))
	if pageSize == 1 {
		pageSize = 65536
	}
	usable := pageSize - int64(file[20])
	owner := map[int64][2]string{} // page -> name, dbstat's pagetype
	rows, err := db.read.Query(`SELECT name, pageno, pagetype FROM dbstat`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name, typ string
		var page int64
		if err := rows.Scan(&name, &page, &typ); err != nil {
			t.Fatal(err)
		}
		owner[page] = [2]string{name, typ}
	}
	rows.Close()
	free := freePages(file, pageSize)
	var out []leftover
	for _, v := range values {
		for from := 0; ; {
			i := bytes.Index(file[from:], []byte(v))
			if i < 0 {
				break
			}
			at := int64(from + i)
			from += i + 1
			page := at/pageSize + 1
			l := leftover{Value: v, Page: page, Name: owner[page][0]}
			switch {
			case free[page]:
				l.Place, l.Name = placeFreePage, "(freelist)"
			case owner[page][1] == "overflow":
				l.Place = placeOverflow
			case owner[page][1] == "leaf" || owner[page][1] == "internal":
				start := (page - 1) * pageSize
				l.Place = placeInPage(file[start:start+pageSize], page == 1, usable, int(at-start))
			default:
				l.Place = placeOther
			}
			out = append(out, l)
		}
	}
	return out
}

// freePages are the pages on the freelist: its trunk pages and the leaves
// they list (SQLite's file format, "The Freelist").
func freePages(file []byte, pageSize int64) map[int64]bool {
	free := map[int64]bool{}
	for trunk := int64(binary.BigEndian.Uint32(file[32:36])); trunk != 0 && !free[trunk]; {
		free[trunk] = true
		p := file[(trunk-1)*pageSize : trunk*pageSize]
		n := int64(binary.BigEndian.Uint32(p[4:8]))
		for i := range n {
			free[int64(binary.BigEndian.Uint32(p[8+4*i:12+4*i]))] = true
		}
		trunk = int64(binary.BigEndian.Uint32(p[0:4]))
	}
	return free
}

// placeInPage says where offset off of the b-tree page p lies.
func placeInPage(p []byte, first bool, usable int64, off int) string {
	hdr := 0
	if first {
		hdr = 100
	}
	typ := p[hdr]
	hdrSize := 8
	if typ == 2 || typ == 5 {
		hdrSize = 12
	}
	nCells := int(binary.BigEndian.Uint16(p[hdr+3:]))
	content := int(binary.BigEndian.Uint16(p[hdr+5:]))
	if content == 0 {
		content = 65536
	}
	ptrEnd := hdr + hdrSize + 2*nCells
	switch {
	case off < ptrEnd:
		return placeHeader
	case off < content:
		return placeGap
	}
	for fb := int(binary.BigEndian.Uint16(p[hdr+1:])); fb != 0; fb = int(binary.BigEndian.Uint16(p[fb:])) {
		if off >= fb && off < fb+int(binary.BigEndian.Uint16(p[fb+2:])) {
			return placeFreeblock
		}
	}
	for i := range nCells {
		c := int(binary.BigEndian.Uint16(p[hdr+hdrSize+2*i:]))
		if off >= c && off < c+cellSize(p[c:], typ, usable) {
			return placeCell
		}
	}
	return placeFragment
}

// cellSize is the bytes a cell takes on its page (SQLite's file format,
// "B-tree Pages": the local part of the payload, and the overflow page
// number when the payload spills).
func cellSize(c []byte, typ byte, usable int64) int {
	n := 0
	if typ == 2 || typ == 5 {
		n = 4 // left child page
	}
	if typ == 5 {
		_, k := sqliteVarint(c[n:])
		return n + k
	}
	payload, k := sqliteVarint(c[n:])
	n += k
	if typ == 13 {
		_, k := sqliteVarint(c[n:])
		n += k
	}
	x := usable - 35
	if typ != 13 {
		x = (usable-12)*64/255 - 23
	}
	if payload <= x {
		return n + int(payload)
	}
	m := (usable-12)*32/255 - 23
	local := m + (payload-m)%(usable-4)
	if local > x {
		local = m
	}
	return n + int(local) + 4
}

// sqliteVarint decodes SQLite's big-endian varint: its value and length.
func sqliteVarint(b []byte) (int64, int) {
	var v int64
	for i := range 8 {
		v = v<<7 | int64(b[i]&0x7f)
		if b[i] < 0x80 {
			return v, i + 1
		}
	}
	return v<<8 | int64(b[8]), 9
}

// After an erasure, no erased value is in any row (what SQL reads and the
// export see) nor on a free page, but stale copies can stay in a page's
// unused space: when the erasure's deletions leave a page under a third
// full, SQLite rebalances it with its neighbours, moving cells (the
// subject's not yet deleted among them), and a page it rebuilds (btree.c
// editPage falling back to rebuildPage) gets its cells written anew at its
// end without the bytes under the new content start being cleared;
// secure_delete clears only deleted cells (freeSpace), freed pages and what
// defragmentPage moves. A VACUUM (tally vacuum) rewrites every page, and
// then nothing is left (docs/gdpr.md).
func TestErasureLeavesFragmentsOnlyInUnusedSpaceUntilVacuum(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "reads the bytes of the SQLite file (secure_delete, VACUUM)")
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a.db")
	db, err := openTestDB(t, ctx, Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	withSites(t, db, "s")
	user, anon := "zq-subject-user-7731", "zq-subject-anon-7731"
	values := []string{user, anon, "ZqBrowser7731", "zq-city-7731", "zq-campaign-7731", "zq-ref-7731"}
	// The subject sends every second event: its erasure leaves most pages
	// of events under a third full. 300 events leave nothing
	// (TestErasureLeavesNoIdentifierInTheFileOrDictionary); 800 leave
	// copies on one page.
	var batch []IngestEvent
	for i := range 800 {
		url := fmt.Sprintf("https://a.test/p/%d", i%5)
		e := IngestEvent{ID: fmt.Sprintf("ev-%d", i), SiteID: "s", Type: "pageview", AnonID: "other", URL: &url,
			TS: time.Date(2026, 3, 1, 8, 0, i, 0, time.UTC), Raw: []byte(fmt.Sprintf(`{"id":"ev-%d","anon_id":"other"}`, i))}
		if i%2 == 0 {
			url = fmt.Sprintf("https://a.test/p/%d?utm_campaign=zq-campaign-7731", i%5)
			ref := "https://zq-ref-7731.test/x"
			e.AnonID, e.UserID = anon, &user
			e.Raw = []byte(fmt.Sprintf(`{"id":"ev-%d","anon_id":%q,"user_id":%q,"traits":{"note":"%s"}}`, i, anon, user, user))
			e.URL, e.Referrer, e.Browser, e.OS, e.DeviceType, e.City = &url, &ref, "ZqBrowser7731", "Linux", "desktop", "zq-city-7731"
		}
		batch = append(batch, e)
	}
	if _, err := db.Ingest(ctx, batch, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Space(ctx); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{user, "ZqBrowser7731", "zq-city-7731", "zq-campaign-7731", "zq-ref-7731"} {
		if len(findLeftovers(t, db, path, []string{v})) == 0 {
			t.Fatalf("got no %q in the file before erasure: the test would prove nothing", v)
		}
	}
	site, _ := db.Site("s")
	if _, err := db.EraseSubject(ctx, Actor{Kind: ActorSystem}, site, Subject{UserID: user}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Space(ctx); err != nil {
		t.Fatal(err)
	}

	// What SQL reads: the export, every column of every table, and the raw
	// payloads as readers decompress them.
	for _, s := range []Subject{{UserID: user}, {AnonID: anon}} {
		x, err := db.ExportSubject(ctx, Actor{Kind: ActorSystem}, site, s)
		if err != nil {
			t.Fatal(err)
		}
		if x.Counts != (ExportCounts{}) {
			t.Errorf("export of %+v after erasure: got counts %+v, want none", s, x.Counts)
		}
	}
	for _, v := range values {
		if n := rowsHolding(t, db, v); n != "" {
			t.Errorf("got %q in rows after erasure: %s, want none", v, n)
		}
	}

	// What the file holds: nothing in a cell, on an overflow or free page;
	// only in pages' unused space, and there only until a vacuum.
	found := findLeftovers(t, db, path, values)
	unused := map[string]bool{placeGap: true, placeFreeblock: true, placeFragment: true}
	var pages []string
	for _, l := range found {
		if !unused[l.Place] {
			t.Errorf("got %s after erasure, want it at most in a page's unused space", l)
		}
		pages = append(pages, l.String())
	}
	sort.Strings(pages)
	t.Logf("%d leftovers after erasure:\n%s", len(found), strings.Join(pages, "\n"))
	if len(found) == 0 {
		t.Errorf("got no leftover in the pages' unused space after erasure, want some: either SQLite now clears a rebuilt page " +
			"(rebuildPage), and docs/gdpr.md can say so, or this data no longer makes the erasure rebalance pages")
	}
	// A backup copies the pages as they are, unused space included: one
	// taken after the erasure, before a vacuum, holds the same leftovers.
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	if _, err := db.Backup(ctx, copyPath, false); err != nil {
		t.Fatal(err)
	}
	backup, err := os.ReadFile(copyPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range found {
		if !bytes.Contains(backup, []byte(l.Value)) {
			t.Errorf("got no %q in a backup taken after the erasure, want the file's leftovers in it (docs/gdpr.md says so)", l.Value)
		}
	}
	if wal, err := os.ReadFile(path + "-wal"); err == nil {
		for _, v := range values {
			if bytes.Contains(wal, []byte(v)) {
				t.Errorf("got %q in the WAL after the checkpoint, want none", v)
			}
		}
	}

	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Vacuum(ctx, path); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(path + "*")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("got %q in %s after the vacuum, want none", v, filepath.Base(f))
			}
		}
	}
}

// rowsHolding names the table columns (and the decompressed raw payloads)
// whose values contain v, "" when none does.
func rowsHolding(t *testing.T, db *DB, v string) string {
	t.Helper()
	type column struct{ table, name string }
	var cols []column
	rows, err := db.read.Query(`SELECT m.name, c.name FROM sqlite_schema m, pragma_table_info(m.name) c WHERE m.type = 'table'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c column
		if err := rows.Scan(&c.table, &c.name); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
	}
	rows.Close()
	var hits []string
	for _, c := range cols {
		var n int
		q := fmt.Sprintf(`SELECT COUNT(*) FROM %q WHERE instr(CAST(%q AS BLOB), CAST(? AS BLOB)) > 0`, c.table, c.name)
		if err := db.read.QueryRow(q, v).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if n > 0 {
			hits = append(hits, fmt.Sprintf("%s.%s (%d rows)", c.table, c.name, n))
		}
	}
	var n int
	if err := db.read.QueryRow(`SELECT COUNT(*) FROM events WHERE instr(`+rawSQL+`, ?) > 0`, v).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		hits = append(hits, fmt.Sprintf("events raw, decompressed (%d rows)", n))
	}
	return strings.Join(hits, ", ")
}
