package storage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// storedRawOf reads events.raw of the event with id as the readers see it
// (event_raw) and as stored (its SQL type).
func storedRawOf(t *testing.T, db *DB, id string) (raw []byte, typ string) {
	t.Helper()
	// Read as every reader does (report_raw_read.go); the form is told by the
	// first byte, which only the compressed forms hold below '{'.
	r := newRawRead(db.d)
	var first []byte
	err := db.read.QueryRow(`SELECT `+r.columns()+`, substr(raw, 1, 1) FROM events WHERE id = ?`, id).Scan(append(r.targets(), &first)...)
	if err == nil {
		err = r.decode()
	}
	if err != nil {
		t.Fatalf("read raw of %s: %v", id, err)
	}
	typ = "text"
	if len(first) == 1 && first[0] <= rawFormatV3 {
		typ = "blob"
	}
	return []byte(r.Raw.String), typ
}

func TestRawIsStoredCompressedAndReadBackExactly(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "shop")
	user, url, ref := "user-42", "https://shop.example/p/7?q=shop", "https://ref.example/"
	long := `{"id":"e-long","type":"pageview","anon_id":"a-1","properties":{"text":"` + string(bytes.Repeat([]byte("lorem ipsum "), 500)) + `"}}`
	tests := []struct {
		name     string
		e        IngestEvent
		wantType string
	}{
		{"every column repeated, some twice", IngestEvent{ID: "e-1", Type: "pageview", AnonID: "a-1", UserID: &user, URL: &url, Referrer: &ref,
			Raw: []byte(`{"id":"e-1","site_id":"shop","type":"pageview","anon_id":"a-1","user_id":"user-42","url":"https://shop.example/p/7?q=shop","referrer":"https://ref.example/","properties":{"again":"user-42","site":"shop"}}`)}, "blob"},
		{"value inside another value", IngestEvent{ID: "e-2", Type: "shop", AnonID: "shop.example", URL: &url,
			Raw: []byte(`{"id":"e-2","type":"shop","anon_id":"shop.example","url":"https://shop.example/p/7?q=shop"}`)}, "blob"},
		{"whitespace, escapes and unicode kept", IngestEvent{ID: "e-3", Type: "click", AnonID: "a-3",
			Raw: []byte("{ \"id\" : \"e-3\",\n\t\"type\":\"click\", \"anon_id\":\"a\\u002d3\", \"t\":\"\\u0001 ünï €\\/\" }\r\n")}, "blob"},
		{"value holding a control byte is not replaced", IngestEvent{ID: "e-4", Type: "click", AnonID: "a\x01b",
			Raw: []byte(`{"id":"e-4","type":"click","anon_id":"a\u0001b"}`)}, "blob"},
		{"short values", IngestEvent{ID: "e5", Type: "x", AnonID: "ab", Raw: []byte(`{"id":"e5","type":"x","anon_id":"ab"}`)}, "blob"},
		{"long payload", IngestEvent{ID: "e-long", Type: "pageview", AnonID: "a-1", Raw: []byte(long)}, "blob"},
		{"bytes JSON never holds: kept as text", IngestEvent{ID: "e-6", Type: "click", AnonID: "a-6",
			Raw: []byte("{\"id\":\"e-6\",\x02\"anon_id\":\"a-6\"}")}, "text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.e.SiteID, tt.e.TS = "shop", time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
			if _, err := db.Ingest(context.Background(), []IngestEvent{tt.e}, nil, nil); err != nil {
				t.Fatal(err)
			}
			got, typ := storedRawOf(t, db, tt.e.ID)
			if !bytes.Equal(got, tt.e.Raw) {
				t.Fatalf("got raw %q, want %q", got, tt.e.Raw)
			}
			if typ != tt.wantType {
				t.Fatalf("got raw stored as %s, want %s", typ, tt.wantType)
			}
			var size int
			db.read.QueryRow(`SELECT length(CAST(raw AS BLOB)) FROM events WHERE id = ?`, tt.e.ID).Scan(&size)
			if (tt.name == "long payload" || tt.name == "every column repeated, some twice") && size >= len(tt.e.Raw)/2 {
				t.Fatalf("got %d bytes stored for %d of raw, want less than half", size, len(tt.e.Raw))
			}
		})
	}
	events, err := db.SiteEvents(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != len(tests) {
		t.Fatalf("got %d events, want %d", len(events), len(tests))
	}
	for i, e := range events {
		if want := tests[i].e.Raw; tests[i].wantType == "blob" && !bytes.Equal(e.Raw, want) {
			t.Fatalf("SiteEvents: got raw %q, want %q", e.Raw, want)
		}
	}
}

// textRows turns every event of db back into the form of before 0010 (raw
// as JSON text) and asks for their conversion, as migration 0010 does.
func textRows(t *testing.T, db *DB) {
	t.Helper()
	err := db.writer.do(context.Background(), func(tx *writeTx) error {
		if _, err := tx.Exec(`UPDATE events SET raw = ` + rawSQL + `, received_at = ` + receivedSQL); err != nil {
			return err
		}
		_, err := tx.Exec(`INSERT INTO raw_conversion(id, next_seq, end_seq) SELECT 1, 0, MAX(seq) FROM events`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func rawForms(t *testing.T, db *DB) (text, blob int) {
	t.Helper()
	err := db.read.QueryRow(`SELECT COUNT(*) FILTER (WHERE typeof(raw) = 'text'), COUNT(*) FILTER (WHERE typeof(raw) = 'blob') FROM events`).Scan(&text, &blob)
	if err != nil {
		t.Fatal(err)
	}
	return text, blob
}

// rawFixture stores n events whose raw repeats some columns.
func rawFixture(t *testing.T, db *DB, n int) []StoredEvent {
	t.Helper()
	withSites(t, db, "s")
	var batch []IngestEvent
	for i := range n {
		url := fmt.Sprintf("https://a.test/p/%d", i%13)
		anon := fmt.Sprintf("anon-%d", i%7)
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		batch = append(batch, IngestEvent{ID: id, SiteID: "s", Type: "pageview", AnonID: anon, URL: &url,
			TS:  time.Date(2026, 3, 1, 8, 0, i, 0, time.UTC),
			Raw: []byte(fmt.Sprintf(`{"id":%q,"type":"pageview","anon_id":%q,"url":%q,"properties":{"n":%d}}`, id, anon, url, i))})
	}
	if _, err := db.Ingest(context.Background(), batch, nil, nil); err != nil {
		t.Fatal(err)
	}
	want, err := db.SiteEvents(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	return want
}

func sameEvents(t *testing.T, db *DB, want []StoredEvent) {
	t.Helper()
	got, err := db.SiteEvents(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for i := range got {
		g, _ := json.Marshal(got[i])
		w, _ := json.Marshal(want[i])
		if !bytes.Equal(g, w) || !bytes.Equal(got[i].Raw, want[i].Raw) {
			t.Fatalf("got event %s, want %s", g, w)
		}
	}
}

func TestRawConversionInChunksResumesAfterACrash(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "converts an old SQLite layout")
	path := filepath.Join(t.TempDir(), "a.db")
	db, err := openTestDB(t, context.Background(), Options{Path: path, rawConvertChunk: -1})
	if err != nil {
		t.Fatal(err)
	}
	want := rawFixture(t, db, 250)
	textRows(t, db)
	sameEvents(t, db, want)
	// Two chunks of 100, each read back right after: both forms readable.
	for step := 1; step <= 2; step++ {
		n, done, err := db.convertRawChunk(context.Background(), 100)
		if err != nil || done || n != 100 {
			t.Fatalf("chunk %d: got %d converted, done %v, err %v; want 100, not done", step, n, done, err)
		}
		if text, blob := rawForms(t, db); text != 250-100*step || blob != 100*step {
			t.Fatalf("after chunk %d: got %d text and %d compressed rows, want %d and %d", step, text, blob, 250-100*step, 100*step)
		}
		sameEvents(t, db, want)
	}
	// A crash: the next start resumes at the third chunk, in the background.
	db.Close()
	db, err = openTestDB(t, context.Background(), Options{Path: path, rawConvertChunk: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	<-db.conv.done
	if text, blob := rawForms(t, db); text != 0 || blob != 250 {
		t.Fatalf("after restart: got %d text and %d compressed rows, want 0 and 250", text, blob)
	}
	wantConversionGone(t, db, "raw_conversion")
	sameEvents(t, db, want)
}

func TestRawConversionSkipsRowsChangedMeanwhile(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "converts an old SQLite layout")
	db, err := openTestDB(t, context.Background(), Options{Path: filepath.Join(t.TempDir(), "a.db"), rawConvertChunk: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	want := rawFixture(t, db, 20)
	textRows(t, db)
	// Intake goes on during the conversion: new rows arrive compressed
	// and are left as they are.
	url := "https://a.test/late"
	if _, err := db.Ingest(context.Background(), []IngestEvent{{ID: "late", SiteID: "s", Type: "click", AnonID: "anon-1", URL: &url,
		TS: time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC), Raw: []byte(`{"id":"late","type":"click"}`)}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	for {
		_, done, err := db.convertRawChunk(context.Background(), 7)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
	}
	if text, blob := rawForms(t, db); text != 0 || blob != 21 {
		t.Fatalf("got %d text and %d compressed rows, want 0 and 21", text, blob)
	}
	got, _ := db.SiteEvents(context.Background(), "s")
	sameEvents(t, db, append(want, got[20]))
	if raw, _ := storedRawOf(t, db, "late"); string(raw) != `{"id":"late","type":"click"}` {
		t.Fatalf("got raw %s of the event sent meanwhile", raw)
	}
}

func TestMigration0010ConvertsExistingEvents(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "converts an old SQLite layout")
	path := filepath.Join(t.TempDir(), "a.db")
	db, err := openTestDB(t, context.Background(), Options{Path: path, rawConvertChunk: -1})
	if err != nil {
		t.Fatal(err)
	}
	want := rawFixture(t, db, 120)
	// As a database of 0009 would hold them: text, no conversion row, and
	// 0010 not applied yet.
	execInWriter(t, db, `UPDATE events SET raw = `+rawSQL+`, received_at = `+receivedSQL, `DROP TABLE raw_conversion`,
		`DELETE FROM schema_migrations WHERE version = 10`)
	db.Close()
	db = openTest(t, path)
	<-db.conv.done
	if text, blob := rawForms(t, db); text != 0 || blob != 120 {
		t.Fatalf("got %d text and %d compressed rows, want 0 and 120", text, blob)
	}
	sameEvents(t, db, want)
}

func TestEmptyDatabaseHasNoRawConversion(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "SQLite's conversions")
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	var n int
	if err := db.read.QueryRow(`SELECT COUNT(*) FROM raw_conversion`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("got %d raw_conversion rows (%v), want 0", n, err)
	}
}

// After an erasure, nothing of the subject's identifiers is left in the
// file: not in rows, not in freed pages (secure_delete), and not in the
// compression dictionary, which is fixed and synthetic; nor are the values
// of their visits and events (the agent's codes are fixed lists, holding no
// one's; an agent off them is text in the subject's rows only). The same
// holds for rows stored before migration 0020 and rewritten by its
// conversion (part of them, as when an erasure comes during it): the rows'
// former copies are gone too. An identifying page path of the subject is
// gone from event_pages too (its delete trigger), also when the subject is
// erased while the backfill of migration 0021 has reached only part of
// their events, and after that backfill ends.
func TestErasureLeavesNoIdentifierInTheFileOrDictionary(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "reads the bytes of the SQLite file")
	for _, mode := range []string{"written since 0021", "converted by 0020", "backfilled in part by 0021"} {
		t.Run(mode, func(t *testing.T) {
			erasureLeavesNoIdentifier(t, mode)
		})
	}
}

func erasureLeavesNoIdentifier(t *testing.T, mode string) {
	converted := mode == "converted by 0020"
	path := filepath.Join(t.TempDir(), "a.db")
	db := openTest(t, path)
	withSites(t, db, "s")
	user, anon := "zq-subject-user-7731", "zq-subject-anon-7731"
	var batch []IngestEvent
	for i := range 300 {
		url := fmt.Sprintf("https://a.test/p/%d", i%5)
		e := IngestEvent{ID: fmt.Sprintf("ev-%d", i), SiteID: "s", Type: "pageview", AnonID: "other", URL: &url,
			TS: time.Date(2026, 3, 1, 8, 0, i, 0, time.UTC), Raw: []byte(fmt.Sprintf(`{"id":"ev-%d","anon_id":"other"}`, i))}
		// Every third event: a subject sending every second one can leave
		// stale copies in pages SQLite rebalances (docs/gdpr.md, What is
		// left in the file's bytes; TestErasureLeavesFragmentsOnlyInUnused-
		// SpaceUntilVacuum), as it did here once rows grew two columns (0027).
		if i%3 == 0 {
			e.AnonID, e.UserID = anon, &user
			e.Raw = []byte(fmt.Sprintf(`{"id":"ev-%d","anon_id":%q,"user_id":%q,"traits":{"note":"%s"}}`, i, anon, user, user))
			// Visit values only the subject has: an agent off the codes'
			// lists (kept as text in its visit and its events), a city, a
			// campaign and a referrer (docs/intake.md#visits, Stored form).
			// An identifying page (its path is in event_pages), in a url
			// as long as the other events': longer rows make the erasure
			// rebalance pages of events, which can leave stale copies in
			// their unused space (docs/gdpr.md, What is left in the file's bytes;
			// TestErasureLeavesFragmentsOnlyInUnusedSpaceUntilVacuum).
			url = fmt.Sprintf("https://a/@zq7731%d?utm_campaign=zq-campaign-7731", i%5)
			ref := "https://zq-ref-7731.test/x"
			e.URL, e.Referrer, e.Browser, e.OS, e.DeviceType, e.City = &url, &ref, "ZqBrowser7731", "Linux", "desktop", "zq-city-7731"
			if converted && i%4 == 0 {
				// An event the conversion rewrites: its id and agent take
				// the short forms.
				e.ID, e.Browser = fmt.Sprintf("7731aaaa-0b4d-4e5f-8a9b-%012d", i), "Firefox"
				e.Raw = []byte(fmt.Sprintf(`{"id":%q,"anon_id":%q,"user_id":%q}`, e.ID, anon, user))
			}
		}
		batch = append(batch, e)
	}
	if _, err := db.Ingest(context.Background(), batch, nil, nil); err != nil {
		t.Fatal(err)
	}
	if converted {
		undo0020(t, db)
		db.Close()
		var err error
		if db, err = openTestDB(t, context.Background(), Options{Path: path, eventColumnsChunk: -1}); err != nil {
			t.Fatal(err)
		}
		defer func() { db.Close() }()
		if n, _, err := db.convertEventColumns(context.Background(), 150); err != nil || n == 0 {
			t.Fatalf("conversion: got %d rows rewritten (%v), want some", n, err)
		}
	}
	if mode == "backfilled in part by 0021" {
		undo0021(t, db)
		db.Close()
		var err error
		if db, err = openTestDB(t, context.Background(), Options{Path: path, eventPagesChunk: -1}); err != nil {
			t.Fatal(err)
		}
		defer func() { db.Close() }()
		if n, done, err := db.backfillEventPages(context.Background(), 150, nil); err != nil || n != 150 || done {
			t.Fatalf("backfill: got %d rows written, done %v (%v); want 150, not done", n, done, err)
		}
	}
	file := func() []byte {
		if _, _, err := db.Space(context.Background()); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	before := file()
	var paths int
	db.read.QueryRow(`SELECT COUNT(*) FROM event_pages WHERE path LIKE '%@zq7731%'`).Scan(&paths)
	if paths == 0 {
		t.Fatal("got no event_pages row of the subject's path before erasure: the test would prove nothing")
	}
	for _, v := range []string{user, "ZqBrowser7731", "zq-city-7731", "zq-campaign-7731", "zq-ref-7731", "@zq7731"} {
		if !bytes.Contains(before, []byte(v)) {
			t.Fatalf("got no %q in the file before erasure: the test would prove nothing", v)
		}
	}
	site, _ := db.Site("s")
	if _, err := db.EraseSubject(context.Background(), Actor{Kind: ActorSystem}, site, Subject{UserID: user}); err != nil {
		t.Fatal(err)
	}
	after := file()
	if mode == "backfilled in part by 0021" {
		if _, done, err := db.backfillEventPages(context.Background(), 1000, nil); err != nil || !done {
			t.Fatalf("backfill: got done %v (%v), want done", done, err)
		}
		after = append(after, file()...)
	}
	for _, id := range []string{user, anon, "ZqBrowser7731", "zq-city-7731", "zq-campaign-7731", "zq-ref-7731", "@zq7731"} {
		if bytes.Contains(after, []byte(id)) {
			t.Errorf("got %q in the database file after erasure, want none", id)
		}
		if bytes.Contains(rawDictV1, []byte(id)) {
			t.Errorf("got %q in the compression dictionary", id)
		}
	}
}

func TestDedupAcrossTheUpgradeToUUIDBlobs(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "converts an old SQLite layout")
	path := filepath.Join(t.TempDir(), "a.db")
	db := openTest(t, path)
	withSites(t, db, "s")
	ids := []string{"6f1c2a3e-0b4d-4e5f-8a9b-0c1d2e3f4a5b", "6F1C2A3E-0B4D-4E5F-8A9B-0C1D2E3F4A5B", "not-a-uuid", "6f1c2a3e0b4d4e5f8a9b0c1d2e3f4a5b"}
	send := func(db *DB) []bool {
		t.Helper()
		var batch []IngestEvent
		for _, id := range ids {
			batch = append(batch, IngestEvent{ID: id, SiteID: "s", Type: "click", AnonID: "a", TS: time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC), Raw: []byte(`{}`)})
		}
		r, err := db.Ingest(context.Background(), batch, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r.Duplicate
	}
	if got := fmt.Sprint(send(db)); got != "[false false false false]" {
		t.Fatalf("first send: got duplicates %s, want none", got)
	}
	var blobs int
	db.read.QueryRow(`SELECT COUNT(*) FROM event_ids WHERE typeof(id) = 'blob' AND length(id) = 16`).Scan(&blobs)
	if blobs != 1 {
		t.Fatalf("got %d ids stored as 16 bytes, want 1 (the canonical UUID only)", blobs)
	}
	// As 0009 stored them: text. Migration 0010 converts them, and the
	// repeats sent after the upgrade are still found.
	execInWriter(t, db, `UPDATE event_ids SET id = '`+ids[0]+`' WHERE typeof(id) = 'blob'`,
		`DROP TABLE raw_conversion`, `DELETE FROM schema_migrations WHERE version = 10`)
	db.Close()
	db = openTest(t, path)
	if got := fmt.Sprint(send(db)); got != "[true true true true]" {
		t.Fatalf("after the upgrade: got duplicates %s, want all", got)
	}
}

// Rows compressed with rawdict/v1.json can only be read with exactly those
// bytes: a new dictionary gets a new file, id and format byte.
func TestRawDictionaryV1IsFrozen(t *testing.T) {
	t.Parallel()
	sum := sha256.Sum256(rawDictV1)
	if got, want := hex.EncodeToString(sum[:]), "4fe00d1227ad8df390379d8010e150fabfd8833460739f00400e81b1b3816da2"; got != want {
		t.Fatalf("got rawdict/v1.json with SHA-256 %s, want %s: rows stored with it would no longer read", got, want)
	}
}

// Whatever the payload and the columns, the stored form reads back as the
// payload, byte for byte.
func FuzzRawRoundTrip(f *testing.F) {
	f.Add([]byte(`{"id":"e-1","anon_id":"a-1","url":"https://x.test/a-1"}`), "e-1", "a-1", "https://x.test/a-1")
	f.Add([]byte("{\"k\":\"\\u0001\"}\x03"), "k", "\x01x", "")
	f.Add([]byte(`aaaaaaaa`), "aa", "aaa", "aaaa")
	f.Add([]byte(`{"id":"e-1","site_id":"s","anon_id":"a-1","type":"t","url":"u","properties":{"title":"\",\"type\":\"","k":"\u0010"}}`), "e-1", `","type":"`, `{"id":"`)
	f.Fuzz(func(t *testing.T, raw []byte, a, b, c string) {
		fields := rawFields{a, b, c, b + a, a + c, c, a}
		ts, received := "2026-03-01T08:00:00.250Z", "2026-03-01T08:00:01.000Z"
		stored, receivedAt := storedRaw(raw, fields, ts, received)
		got, err := decodeRaw(stored, fields)
		if err != nil {
			t.Fatal(err)
		}
		if r, err := receivedOf(receivedAt, stored, ts); err != nil || r != received {
			t.Fatalf("got received %q (%v) back, want %q", r, err, received)
		}
		if !bytes.Equal(got, raw) && !(len(raw) == 0 && len(got) == 0) {
			t.Fatalf("got %q back, want %q", got, raw)
		}
	})
}

// execInWriter runs stmts in one writer job: how a test turns a database
// back into what an older migration left.
func execInWriter(t *testing.T, db *DB, stmts ...string) {
	t.Helper()
	err := db.writer.do(context.Background(), func(tx *writeTx) error {
		for _, q := range stmts {
			if _, err := tx.Exec(q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// replaceInTurn is bytes.ReplaceAll of each pattern in turn, what
// replaceValues and replaceKeys must give.
func replaceInTurn(s []byte, pats []string, subs []byte) []byte {
	s = bytes.Clone(s)
	for i, p := range pats {
		if p != "" {
			s = bytes.ReplaceAll(s, []byte(p), []byte{subs[i]})
		}
	}
	return s
}

// The one-scan replacements give what replacing each value, then each key,
// in turn gives: the stored bytes of every row stay what they were.
func TestRawReplacementsMatchReplacingInTurn(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 8))
	// Pieces that overlap the keys and each other.
	pieces := []string{`{"id":"`, `","`, `":"`, `":`, `,"`, `"}`, `}}`, `}`, `{`, `"`, `,`, `:`, `https://`, `http`, `"title":"`,
		`","site_id":"`, `","type":"`, `","properties":{`, `"userAgent":"`, `"library":{"name":"`, `e-1`, `a-1`, `aaa`, `aa`, `shop`,
		`https://shop.example/p`, `pageview`, ` `, `x`, `é`, `\u0001`}
	for n := range 20000 {
		var b bytes.Buffer
		for range rng.IntN(40) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		raw := b.Bytes()
		var f rawFields
		for i := range f {
			switch rng.IntN(4) {
			case 0: // absent
			case 1:
				f[i] = pieces[rng.IntN(len(pieces))] + pieces[rng.IntN(len(pieces))]
			default: // a piece of raw itself
				if len(raw) > 0 {
					a := rng.IntN(len(raw))
					f[i] = string(raw[a:min(len(raw), a+3+rng.IntN(12))])
				}
			}
		}
		var pats []string
		var subs []byte
		for i, v := range f {
			if !usable(v) {
				v = ""
			}
			pats, subs = append(pats, v), append(subs, byte(i+1))
		}
		wantValues := replaceInTurn(raw, pats, subs)
		if got := replaceValues(raw, f); !bytes.Equal(got, wantValues) {
			t.Fatalf("case %d: replaceValues(%q, %q) = %q, want %q", n, raw, f, got, wantValues)
		}
		want := replaceInTurn(wantValues, rawKeys[:], rawKeyBytes[:])
		if got := replaceKeys(wantValues); !bytes.Equal(got, want) {
			t.Fatalf("case %d: replaceKeys(%q) = %q, want %q", n, wantValues, got, want)
		}
	}
}

// storedTimeMS accepts exactly the texts receivedDelta's check accepts,
// with the same milliseconds.
func TestStoredTimeMSMatchesParse(t *testing.T) {
	t.Parallel()
	slow := func(s string) (int64, bool) {
		v, err := time.Parse(timeLayout, s)
		if err != nil || FormatTime(v) != s {
			return 0, false
		}
		return v.UnixMilli(), true
	}
	texts := []string{"2026-03-01T08:00:00.250Z", "1969-12-31T23:59:59.999Z", "0000-01-01T00:00:00.000Z", "9999-12-31T23:59:59.999Z",
		"2024-02-29T12:00:00.000Z", "2026-02-29T12:00:00.000Z", "2026-04-31T00:00:00.000Z", "2026-13-01T00:00:00.000Z",
		"2026-00-01T00:00:00.000Z", "2026-01-00T00:00:00.000Z", "2026-01-01T24:00:00.000Z", "2026-01-01T00:60:00.000Z",
		"2026-01-01T00:00:60.000Z", "2026-01-01T00:00:00.00Z", "2026-01-01T00:00:00.000+", "2026-01-01 00:00:00.000Z",
		"2026-01-01T00:00:00.0a0Z", "+026-01-01T00:00:00.000Z", "2026-01-01T00:00:00Z", ""}
	rng := rand.New(rand.NewPCG(1, 1))
	for range 2000 {
		texts = append(texts, FormatTime(time.UnixMilli(rng.Int64N(400e12)-200e12)))
	}
	for _, s := range texts {
		gotMS, gotOK := storedTimeMS(s)
		wantMS, wantOK := slow(s)
		if gotOK != wantOK || gotMS != wantMS {
			t.Errorf("storedTimeMS(%q) = %d, %v; want %d, %v", s, gotMS, gotOK, wantMS, wantOK)
		}
	}
}

// Run with:
//
//	go test ./storage -run '^$' -bench StoredRaw
//
// BenchmarkStoredRaw is what intake pays per event for its stored raw: a
// pageview of the collector's benchmark (BenchmarkIngest's, about 400
// bytes, which takes rawFormatV3) and a Segment track call with a context
// (about 900 bytes, which takes rawFormatV2). Under valgrind --tool=callgrind
// its instruction counts compare builds whatever the machine's load
// (docs/benchmarks.md).
func BenchmarkStoredRaw(b *testing.B) {
	for _, tc := range []struct {
		name string
		raw  string
		f    rawFields
	}{
		{"pageview", `{"id":"6f1c2a1e-8d3b-4c55-9a7e-2b1d3c4e5f60","site_id":"bench","anon_id":"visitor-01234","type":"pageview","ts":"2026-12-03T17:00:00.123456789Z","url":"https://shop.example/blog/post-1?utm_source=newsletter","referrer":"https://search.example/?q=analytics","properties":{"build":"2026.11.3","height":900,"lang":"en-GB","title":"A page title of ordinary length","tz":"Europe/London","width":1440}}`,
			rawFields{"6f1c2a1e-8d3b-4c55-9a7e-2b1d3c4e5f60", "bench", "pageview", "visitor-01234", "", "https://shop.example/blog/post-1?utm_source=newsletter", "https://search.example/?q=analytics"}},
		{"segment", `{"messageId":"ajs-next-1701619200000-3a1b2c3d","anonymousId":"a1b2c3d4-e5f6-4789-abcd-ef0123456789","userId":"user-98765","type":"track","event":"Order Completed","timestamp":"2026-12-03T17:00:00.123Z","sentAt":"2026-12-03T17:00:00.200Z","originalTimestamp":"2026-12-03T17:00:00.100Z","properties":{"order_id":"ord-123456","total":129.99,"currency":"EUR","products":[{"sku":"SKU-1","name":"Blue T-shirt","price":19.99,"quantity":2},{"sku":"SKU-2","name":"Running shoes, size 42","price":89.99,"quantity":1}]},"context":{"library":{"name":"analytics.js","version":"next-1.70.0"},"userAgent":"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36","page":{"path":"/checkout/complete","referrer":"https://shop.example/cart","title":"Thank you for your order","url":"https://shop.example/checkout/complete"},"locale":"de-DE","timezone":"Europe/Berlin","ip":"203.0.113.7"}}`,
			rawFields{"ajs-next-1701619200000-3a1b2c3d", "bench", "Order Completed", "a1b2c3d4-e5f6-4789-abcd-ef0123456789", "user-98765", "https://shop.example/checkout/complete", "https://shop.example/cart"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			raw := []byte(tc.raw)
			var stored any
			for b.Loop() {
				stored, _ = storedRaw(raw, tc.f, "2026-12-03T17:00:00.123Z", "2026-12-03T17:00:00.200Z")
			}
			b.ReportMetric(float64(len(stored.([]byte))), "stored_bytes")
		})
	}
}
