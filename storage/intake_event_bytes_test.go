package storage

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The received time is kept in raw (rawFormatV2 or rawFormatV3) and the
// received_at column holds the empty text; every reader answers the same
// text as before. A raw that stays text keeps its received_at.
func TestReceivedAtIsKeptInRaw(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 8, 0, 0, 123_000_000, time.UTC)
	db, err := openTestDB(t, context.Background(), Options{Path: filepath.Join(t.TempDir(), "a.db"), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	withSites(t, db, "s")
	tests := []struct {
		id     string
		ts     time.Time
		raw    string
		column string // what received_at holds
	}{
		{"just-before", now.Add(-1500 * time.Millisecond), `{"id":"just-before"}`, ""},
		{"in-the-future", now.Add(90 * time.Minute), `{"id":"in-the-future"}`, ""},
		{"years-old", time.Date(2019, 7, 1, 0, 0, 0, 999_000_000, time.UTC), `{"id":"years-old"}`, ""},
		{"before-1970", time.Date(1969, 12, 31, 23, 59, 59, 500_000_000, time.UTC), `{"id":"before-1970"}`, ""},
		{"kept-as-text", now, "{\"id\":\"kept-as-text\",\x02}", FormatTime(now)},
	}
	var batch []IngestEvent
	for _, tt := range tests {
		batch = append(batch, IngestEvent{ID: tt.id, SiteID: "s", Type: "click", AnonID: "a", TS: tt.ts, Raw: []byte(tt.raw)})
	}
	if _, err := db.Ingest(context.Background(), batch, nil, nil); err != nil {
		t.Fatal(err)
	}
	events, err := db.SiteEvents(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		var column string
		var format sql.NullInt64
		var first []byte
		if err := db.read.QueryRow(`SELECT received_at, substr(raw, 1, 1) FROM events WHERE id = ?`, tt.id).
			Scan(&column, &first); err != nil {
			t.Fatal(err)
		}
		if len(first) == 1 && first[0] <= rawFormatV3 { // a compressed form's format byte
			format = sql.NullInt64{Int64: int64(first[0]), Valid: true}
		}
		if column != tt.column {
			t.Errorf("%s: got received_at column %q, want %q", tt.id, column, tt.column)
		}
		if tt.column == "" && format.Int64 != rawFormatV2 && format.Int64 != rawFormatV3 {
			t.Errorf("%s: got raw format %v, want %d or %d", tt.id, format, rawFormatV2, rawFormatV3)
		}
		if got, want := events[i].ReceivedAt, "2026-03-01T08:00:00.123Z"; got != want {
			t.Errorf("%s: got received_at %q, want %q", tt.id, got, want)
		}
		if got, _ := storedRawOf(t, db, tt.id); string(got) != tt.raw {
			t.Errorf("%s: got raw %q, want %q", tt.id, got, tt.raw)
		}
	}
	site, _ := db.Site("s")
	out, err := db.ExportSubject(context.Background(), Actor{Kind: ActorSystem}, site, Subject{AnonID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range out.Events {
		if e["received_at"] != "2026-03-01T08:00:00.123Z" {
			t.Errorf("export of %v: got received_at %v, want 2026-03-01T08:00:00.123Z", e["id"], e["received_at"])
		}
	}
}

// ts_ms, which the events index keys, orders exactly as ts, before 1970 and
// within a second too.
func TestTsMillisecondsOrderAsTs(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	var batch []IngestEvent
	for i, ts := range []time.Time{
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 500_000_000, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 499_000_000, time.UTC),
		time.Date(2026, 3, 1, 8, 0, 0, 1_000_000, time.UTC),
		time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC),
		time.Date(2026, 3, 1, 7, 59, 59, 999_000_000, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		batch = append(batch, IngestEvent{ID: string(rune('a' + i)), SiteID: "s", Type: "click", AnonID: "v", TS: ts, Raw: []byte(`{}`)})
	}
	if _, err := db.Ingest(context.Background(), batch, nil, nil); err != nil {
		t.Fatal(err)
	}
	rows, err := db.read.Query(`SELECT ts, ts_ms FROM events` + db.d.IndexedBy("events_site_anon_ts") + ` WHERE site_id = 's' AND anon_id = 'v' ORDER BY ts_ms`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	prev := ""
	for rows.Next() {
		var ts string
		var ms int64
		if err := rows.Scan(&ts, &ms); err != nil {
			t.Fatal(err)
		}
		if want, _ := time.Parse(timeLayout, ts); ms != want.UnixMilli() {
			t.Errorf("ts %s: got ts_ms %d, want %d", ts, ms, want.UnixMilli())
		}
		if ts <= prev {
			t.Errorf("got ts %s after %s in ts_ms order, want ts order", ts, prev)
		}
		prev = ts
	}
}

// asOf0011 turns db back into what schema 0011 held: raw of rawFormatV1
// (every second row) or text, received_at as text, the events index on
// the text ts, no ts_ms column, no conversion pending, 0012 not applied.
func asOf0011(t *testing.T, db *DB) {
	t.Helper()
	type row struct {
		seq        int64
		raw        any
		receivedAt string
	}
	var list []row
	rows, err := db.read.Query(`SELECT seq, id, site_id, type, anon_id, COALESCE(user_id, ''), COALESCE(url, ''), COALESCE(referrer, ''),
		` + rawSQL + `, ` + receivedSQL + ` FROM events ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r row
		var f rawFields
		var text string
		if err := rows.Scan(&r.seq, &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6], &text, &r.receivedAt); err != nil {
			t.Fatal(err)
		}
		r.raw = text
		if r.seq%2 == 0 {
			if r.raw, err = encodeRaw([]byte(text), f); err != nil {
				t.Fatal(err)
			}
		}
		list = append(list, r)
	}
	rows.Close()
	err = db.writer.do(context.Background(), func(tx *writeTx) error {
		for _, r := range list {
			if _, err := tx.Exec(`UPDATE events SET raw = ?, received_at = ? WHERE seq = ?`, r.raw, r.receivedAt, r.seq); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	execInWriter(t, db, `DROP INDEX events_site_anon_ts`, `ALTER TABLE events DROP COLUMN ts_ms`,
		`CREATE INDEX events_site_anon_ts ON events(site_id, anon_id, ts)`, `DELETE FROM raw_conversion`,
		`DELETE FROM schema_migrations WHERE version = 12`)
}

// Migration 0012 keys the events index by ts_ms and has the background
// conversion move every row's received time into raw; every read answers
// as before, meanwhile and after.
func TestMigration0012ConvertsExistingEvents(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "converts an old SQLite layout")
	path := filepath.Join(t.TempDir(), "a.db")
	db, err := openTestDB(t, context.Background(), Options{Path: path, rawConvertChunk: -1})
	if err != nil {
		t.Fatal(err)
	}
	rawFixture(t, db, 120)
	user := "u-1"
	if _, err := db.Ingest(context.Background(), []IngestEvent{{ID: "linked", SiteID: "s", Type: "identify", AnonID: "anon-3", UserID: &user,
		TS: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC), Raw: []byte(`{"id":"linked"}`)}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	want, _ := db.SiteEvents(context.Background(), "s")
	timeline, _, err := db.Timeline(context.Background(), "s", user, 10, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	asOf0011(t, db)
	var v2 int
	db.read.QueryRow(`SELECT COUNT(*) FROM events WHERE received_at = ''`).Scan(&v2)
	if v2 != 0 {
		t.Fatalf("got %d rows in the form of 0012 before it, want 0", v2)
	}
	sameEvents(t, db, want)
	db.Close()

	db, err = openTestDB(t, context.Background(), Options{Path: path, rawConvertChunk: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var index string
	db.read.QueryRow(`SELECT sql FROM sqlite_schema WHERE name = 'events_site_anon_ts'`).Scan(&index)
	if !strings.HasSuffix(index, "(site_id, anon_id, ts_ms)") {
		t.Fatalf("got index %q, want it on (site_id, anon_id, ts_ms)", index)
	}
	check := func(when string) {
		t.Helper()
		sameEvents(t, db, want)
		got, _, err := db.Timeline(context.Background(), "s", user, 10, time.Time{})
		if err != nil || len(got) != len(timeline) {
			t.Fatalf("%s: got timeline of %d (%v), want %d", when, len(got), err, len(timeline))
		}
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(timeline)
		if string(g) != string(w) {
			t.Fatalf("%s: got timeline %s, want %s", when, g, w)
		}
	}
	check("before the conversion")
	if _, done, err := db.convertRawChunk(context.Background(), 50); err != nil || done {
		t.Fatalf("first chunk: got done %v, err %v; want more to do", done, err)
	}
	check("halfway")
	for {
		_, done, err := db.convertRawChunk(context.Background(), 50)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
	}
	db.read.QueryRow(`SELECT COUNT(*) FROM events WHERE received_at = '' AND unicode(CAST(substr(raw, 1, 1) AS TEXT)) IN (2, 3)`).Scan(&v2)
	if v2 != 121 {
		t.Fatalf("got %d of 121 rows with the received time in raw after the conversion, want all", v2)
	}
	check("after the conversion")
}

// Rows of rawFormatV3 can only be read with exactly these keys and bytes:
// another table gets a new format byte.
func TestRawKeysAreFrozen(t *testing.T) {
	t.Parallel()
	sum := sha256.Sum256([]byte(strings.Join(rawKeys[:], "\x00") + string(rawKeyBytes[:])))
	if got, want := hex.EncodeToString(sum[:]), "3d5aa9d89a81eb161d1919fd47d36960e11caf04b5ffaa784602d166d594617a"; got != want {
		t.Fatalf("got rawKeys with SHA-256 %s, want %s: rows stored with them would no longer read", got, want)
	}
}

// The writer stores the shorter form: a small event as text with its keys
// replaced (rawFormatV3), a long one compressed (rawFormatV2); both read
// back byte for byte.
func TestRawTakesTheShorterForm(t *testing.T) {
	t.Parallel()
	f := rawFields{"0b1c2a3e-0b4d-4e5f-8a9b-0c1d2e3f4a5b", "bench", "pageview", "visitor-123456", "", "https://shop.example/p/123", ""}
	small := `{"id":"0b1c2a3e-0b4d-4e5f-8a9b-0c1d2e3f4a5b","site_id":"bench","anon_id":"visitor-123456","type":"pageview","url":"https://shop.example/p/123","properties":{"title":"A page title","w":1440}}`
	long := `{"id":"0b1c2a3e-0b4d-4e5f-8a9b-0c1d2e3f4a5b","type":"pageview","properties":{"text":"` + strings.Repeat("lorem ipsum ", 50) + `"}}`
	for _, tt := range []struct {
		name, raw string
		format    byte
	}{{"small", small, rawFormatV3}, {"long", long, rawFormatV2}} {
		stored, received := storedRaw([]byte(tt.raw), f, "2026-03-01T08:00:00.000Z", "2026-03-01T08:00:00.250Z")
		b, _ := stored.([]byte)
		if received != "" || len(b) == 0 || b[0] != tt.format {
			t.Fatalf("%s: got %q stored, received_at %q, want format %d", tt.name, b, received, tt.format)
		}
		if got, err := decodeRaw(stored, f); err != nil || string(got) != tt.raw {
			t.Fatalf("%s: got %q (%v) back, want %q", tt.name, got, err, tt.raw)
		}
		if tt.format == rawFormatV3 && len(b) > 40 {
			t.Fatalf("%s: got %d bytes stored, want at most 40", tt.name, len(b))
		}
	}
}
