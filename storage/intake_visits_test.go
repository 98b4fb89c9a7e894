package storage

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// visitAttrs are a visitor's visits as the query API reads them: one line
// per session, oldest first, every visit column (NULL as "-").
func visitAttrs(t *testing.T, db *DB, site, anon string) []string {
	t.Helper()
	rows, err := db.read.Query(`SELECT started_at, ended_at, event_count, entry_page, exit_page, pageviews, referrer, source,
		utm_source, utm_medium, utm_campaign, utm_term, utm_content, country, city, browser, os, device, visit_ready
		FROM sessions WHERE site_id = ? AND anon_id = ? ORDER BY started_at`, site, anon)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		vals := make([]sql.NullString, 19)
		dests := make([]any, len(vals))
		for i := range vals {
			dests[i] = &vals[i]
		}
		if err := rows.Scan(dests...); err != nil {
			t.Fatal(err)
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = "-"
			if v.Valid {
				parts[i] = v.String
			}
		}
		out = append(out, strings.Join(parts, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// allVisitAttrs is visitAttrs of every visitor of site s, by anon id.
func allVisitAttrs(t *testing.T, db *DB) map[string][]string {
	t.Helper()
	rows, err := db.read.Query(`SELECT DISTINCT anon_id FROM sessions WHERE site_id = 's'`)
	if err != nil {
		t.Fatal(err)
	}
	var anons []string
	for rows.Next() {
		var a string
		rows.Scan(&a)
		anons = append(anons, a)
	}
	rows.Close()
	out := map[string][]string{}
	for _, a := range anons {
		out[a] = visitAttrs(t, db, "s", a)
	}
	return out
}

func str(s string) *string { return &s }

// ev is an event of visitor v on site s at minute min after 10:00 (plus ms).
func ev(id, anon, typ string, min float64, url, ref string) IngestEvent {
	e := IngestEvent{ID: id, SiteID: "s", Type: typ, AnonID: anon,
		TS:  time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).Add(time.Duration(min * float64(time.Minute))),
		Raw: []byte(`{"k":1}`), Country: "DE", City: "Berlin", Browser: "Firefox", OS: "Linux", DeviceType: "desktop"}
	if url != "" {
		e.URL = &url
	}
	if ref != "" {
		e.Referrer = &ref
	}
	return e
}

func ingestAll(t *testing.T, db *DB, events ...IngestEvent) {
	t.Helper()
	if _, err := db.Ingest(context.Background(), events, nil, nil); err != nil {
		t.Fatal(err)
	}
}

// Hand-computed visits: each case's events are sent in order one by one,
// in reverse one by one, and as one shuffled batch, and every arrival
// gives the visits of want.
func TestVisitAttributes(t *testing.T) {
	t.Parallel()
	seg := func(e IngestEvent, c *Campaign) IngestEvent { e.Campaign = c; return e }
	where := func(e IngestEvent, country, city, browser, device string) IngestEvent {
		e.Country, e.City, e.Browser, e.DeviceType = country, city, browser, device
		return e
	}
	const attrs = "started_at ended_at event_count entry_page exit_page pageviews referrer source utm_source utm_medium utm_campaign utm_term utm_content country city browser os device visit_ready"
	tests := []struct {
		name   string
		events []IngestEvent
		want   []string
	}{
		{"pages, entry and exit, paths only", []IngestEvent{
			ev("a1", "v", "pageview", 0, "https://shop.test/Start/?x=1#top", ""),
			ev("a2", "v", "click", 1, "https://shop.test/ignored", ""),
			ev("a3", "v", "pageview", 2, "https://shop.test/caf%C3%A9", ""),
			ev("a4", "v", "pageview", 3, "https://shop.test", ""),
			ev("a5", "v", "signup", 4, "", ""),
		}, []string{"2026-03-01T10:00:00.000Z 2026-03-01T10:04:00.000Z 5 /Start/ / 3 - - - - - - - DE Berlin Firefox Linux desktop 1"}},
		{"no pageview: no entry or exit", []IngestEvent{
			ev("b1", "v", "click", 0, "https://shop.test/a", ""),
			ev("b2", "v", "click", 5, "https://shop.test/b", ""),
		}, []string{"2026-03-01T10:00:00.000Z 2026-03-01T10:05:00.000Z 2 - - 0 - - - - - - - DE Berlin Firefox Linux desktop 1"}},
		{"self-referral ignored, the first external referrer counts", []IngestEvent{
			ev("c1", "v", "pageview", 0, "https://www.shop.test/", "https://shop.test/home"),
			ev("c2", "v", "pageview", 1, "https://shop.test/b", "http://WWW.News.test/story/12/?utm=x#c"),
			ev("c3", "v", "pageview", 2, "https://shop.test/c", "https://other.test/"),
			ev("c4", "v", "pageview", 3, "https://shop.test/d", "http://localhost:3000/"),
		}, []string{"2026-03-01T10:00:00.000Z 2026-03-01T10:03:00.000Z 4 / /d 4 news.test/story/12 news.test - - - - - DE Berlin Firefox Linux desktop 1"}},
		{"a referrer that is not a web address is none", []IngestEvent{
			ev("d1", "v", "pageview", 0, "https://shop.test/", "not a url"),
			ev("d2", "v", "pageview", 1, "https://shop.test/b", "android-app://com.google.android.gm/"),
		}, []string{"2026-03-01T10:00:00.000Z 2026-03-01T10:01:00.000Z 2 / /b 2 android-app://com.google.android.gm Gmail - - - - - DE Berlin Firefox Linux desktop 1"}},
		{"utm from the landing page only", []IngestEvent{
			ev("e1", "v", "pageview", 0, "https://shop.test/?utm_source=newsletter&utm_medium=email&utm_campaign=spring%20sale&utm_term=shoes&utm_content=top", "https://mail.test/"),
			ev("e2", "v", "pageview", 1, "https://shop.test/b?utm_source=later&utm_medium=cpc", ""),
		}, []string{"2026-03-01T10:00:00.000Z 2026-03-01T10:01:00.000Z 2 / /b 2 mail.test newsletter newsletter email spring sale shoes top DE Berlin Firefox Linux desktop 1"}},
		{"a later referrer does not replace the landing's utm_source as source", []IngestEvent{
			ev("k1", "v", "pageview", 0, "https://shop.test/?utm_source=ad", ""),
			ev("k2", "v", "pageview", 1, "https://shop.test/b", "https://later.test/x"),
		}, []string{"2026-03-01T10:00:00.000Z 2026-03-01T10:01:00.000Z 2 / /b 2 later.test/x ad ad - - - - DE Berlin Firefox Linux desktop 1"}},
		{"sources named from the referrer list (docs/intake.md#source-names)", []IngestEvent{
			ev("n1", "v", "pageview", 0, "https://shop.test/", "https://www.google.de/search?q=x"),
		}, []string{"2026-03-01T10:00:00.000Z 2026-03-01T10:00:00.000Z 1 / / 1 google.de/search Google - - - - - DE Berlin Firefox Linux desktop 1"}},
		{"a utm_source naming a known source, in any case, is its name", []IngestEvent{
			ev("o1", "v", "pageview", 0, "https://shop.test/?utm_source=GOOGLE", "https://t.co/abc"),
		}, []string{"2026-03-01T10:00:00.000Z 2026-03-01T10:00:00.000Z 1 / / 1 t.co/abc Google GOOGLE - - - - DE Berlin Firefox Linux desktop 1"}},
		{"a referrer a later event brings is named too", []IngestEvent{
			ev("p1", "v", "pageview", 0, "https://shop.test/", ""),
			ev("p2", "v", "pageview", 1, "https://shop.test/b", "https://news.ycombinator.com/item"),
		}, []string{"2026-03-01T10:00:00.000Z 2026-03-01T10:01:00.000Z 2 / /b 2 news.ycombinator.com/item Hacker News - - - - - DE Berlin Firefox Linux desktop 1"}},
		{"landing without utm: none, though a later page has them", []IngestEvent{
			ev("f1", "v", "pageview", 0, "https://shop.test/", "https://www.search.test/q"),
			ev("f2", "v", "pageview", 1, "https://shop.test/b?utm_source=later", ""),
		}, []string{"2026-03-01T10:00:00.000Z 2026-03-01T10:01:00.000Z 2 / /b 2 search.test/q search.test - - - - - DE Berlin Firefox Linux desktop 1"}},
		{"Segment campaign: name is utm_campaign, and wins over the URL field by field", []IngestEvent{
			seg(ev("g1", "v", "pageview", 0, "https://shop.test/?utm_source=url-src&utm_term=url-term", ""),
				&Campaign{Source: "seg-src", Medium: "seg-med", Name: "seg-name", Content: "seg-content"}),
			seg(ev("g2", "v", "pageview", 1, "https://shop.test/b", ""), &Campaign{Source: "later"}),
		}, []string{"2026-03-01T10:00:00.000Z 2026-03-01T10:01:00.000Z 2 / /b 2 - seg-src seg-src seg-med seg-name url-term seg-content DE Berlin Firefox Linux desktop 1"}},
		{"location and agent of the earliest event", []IngestEvent{
			where(ev("h1", "v", "click", 0, "", ""), "FR", "Paris", "Safari", "mobile"),
			ev("h2", "v", "pageview", 1, "https://shop.test/", ""),
		}, []string{"2026-03-01T10:00:00.000Z 2026-03-01T10:01:00.000Z 2 / / 1 - - - - - - - FR Paris Safari Linux mobile 1"}},
		{"two visits of one visitor", []IngestEvent{
			ev("i1", "v", "pageview", 0, "https://shop.test/one", "https://a.test/"),
			ev("i2", "v", "pageview", 45, "https://shop.test/two?utm_source=ad", "https://b.test/"),
		}, []string{
			"2026-03-01T10:00:00.000Z 2026-03-01T10:00:00.000Z 1 /one /one 1 a.test a.test - - - - - DE Berlin Firefox Linux desktop 1",
			"2026-03-01T10:45:00.000Z 2026-03-01T10:45:00.000Z 1 /two /two 1 b.test ad ad - - - - DE Berlin Firefox Linux desktop 1"}},
		{"events at the same millisecond: the smaller path enters, the larger exits", []IngestEvent{
			ev("j1", "v", "pageview", 0, "https://shop.test/b", "https://z.test/"),
			ev("j2", "v", "pageview", 0, "https://shop.test/a", "https://y.test/"),
			where(ev("j3", "v", "pageview", 0, "https://shop.test/c", ""), "AT", "Wien", "Chrome", "tablet"),
		}, []string{"2026-03-01T10:00:00.000Z 2026-03-01T10:00:00.000Z 3 /a /c 3 y.test y.test - - - - - AT Wien Chrome Linux tablet 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			shuffled := slices.Clone(tt.events)
			rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			reversed := slices.Clone(tt.events)
			slices.Reverse(reversed)
			for _, arrival := range []struct {
				name     string
				requests [][]IngestEvent
			}{
				{"in order", split(tt.events)}, {"reversed", split(reversed)}, {"one shuffled batch", [][]IngestEvent{shuffled}},
			} {
				db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
				withSites(t, db, "s")
				for _, req := range arrival.requests {
					ingestAll(t, db, req...)
				}
				if got := visitAttrs(t, db, "s", "v"); !slices.Equal(got, tt.want) {
					t.Fatalf("%s: got\n  %s\nwant\n  %s\n(%s)", arrival.name, strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "), attrs)
				}
			}
		})
	}
}

// split makes one request of each event.
func split(events []IngestEvent) [][]IngestEvent {
	var out [][]IngestEvent
	for _, e := range events {
		out = append(out, []IngestEvent{e})
	}
	return out
}

// An event that arrives late and bridges two visits merges them: the
// merged visit keeps the earlier one's landing (referrer, campaign,
// location) and the later one's exit, and counts the pageviews of both.
func TestVisitMerge(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	early := where2(ev("m1", "v", "pageview", 0, "https://shop.test/land?utm_campaign=c1", "https://news.test/a"), "FR", "Firefox")
	late := where2(ev("m2", "v", "pageview", 50, "https://shop.test/last?utm_campaign=c2", "https://other.test/"), "US", "Chrome")
	ingestAll(t, db, early)
	ingestAll(t, db, late)
	if got := visitAttrs(t, db, "s", "v"); len(got) != 2 {
		t.Fatalf("got %d visits before the bridge, want 2", len(got))
	}
	ingestAll(t, db, ev("m3", "v", "click", 25, "https://shop.test/mid", ""))
	want := []string{"2026-03-01T10:00:00.000Z 2026-03-01T10:50:00.000Z 3 /land /last 2 news.test/a news.test - - c1 - - FR Berlin Firefox Linux desktop 1"}
	if got := visitAttrs(t, db, "s", "v"); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func where2(e IngestEvent, country, browser string) IngestEvent {
	e.Country, e.Browser = country, browser
	return e
}

// Visits come out the same however their events arrive: shuffled, in
// requests of any size, committed together or apart, with other writes
// (which empty the sessions memo) in between; and equal to the rule
// computed directly on the events sorted by time.
func TestVisitsWhateverTheArrival(t *testing.T) {
	t.Parallel()
	pages := []string{"https://shop.test/", "https://shop.test/a?utm_source=x", "https://www.shop.test/b?utm_source=y&utm_medium=m", "https://shop.test/c#f", ""}
	refs := []string{"", "", "https://shop.test/self", "https://news.test/n/", "https://www.search.test/q?x", "https://other.test"}
	types := []string{"pageview", "pageview", "click", "signup"}
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 9))
			var events []IngestEvent
			base := time.Date(2026, 2, 27, 22, 0, 0, 0, time.UTC)
			for v := range 8 {
				at := base.Add(time.Duration(rng.IntN(60)) * time.Minute)
				for range 5 + rng.IntN(20) {
					gaps := []time.Duration{time.Millisecond, time.Second, 5 * time.Minute, 29 * time.Minute, sessionGap + time.Millisecond, 2 * time.Hour}
					at = at.Add(gaps[rng.IntN(len(gaps))])
					e := IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", len(events)), SiteID: "s",
						Type: types[rng.IntN(len(types))], AnonID: fmt.Sprintf("v%d", v), TS: at, Raw: []byte(`{}`),
						Country: []string{"DE", "FR", ""}[rng.IntN(3)], Browser: "Firefox", OS: "Linux", DeviceType: "desktop"}
					if p := pages[rng.IntN(len(pages))]; p != "" {
						e.URL = &p
					}
					if r := refs[rng.IntN(len(refs))]; r != "" {
						e.Referrer = &r
					}
					events = append(events, e)
				}
			}
			want := expectedVisits(events)

			db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
			withSites(t, db, "s")
			shuffled := slices.Clone(events)
			rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			for len(shuffled) > 0 {
				n := min(1+rng.IntN(6), len(shuffled))
				ingestAll(t, db, shuffled[:n]...)
				shuffled = shuffled[n:]
				if rng.IntN(4) == 0 {
					if err := db.writer.do(context.Background(), func(tx *writeTx) error {
						_, err := tx.Exec(`INSERT INTO daily_salts(day, salt) VALUES ('2000-01-01', ?) ON CONFLICT (day) DO NOTHING`, []byte{0})
						return err
					}); err != nil {
						t.Fatal(err)
					}
				}
			}
			got := allVisitAttrs(t, db)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				for anon := range want {
					if !slices.Equal(got[anon], want[anon]) {
						t.Fatalf("visitor %s: got\n  %s\nwant\n  %s", anon, strings.Join(got[anon], "\n  "), strings.Join(want[anon], "\n  "))
					}
				}
				t.Fatalf("got visitors %v, want %v", got, want)
			}
		})
	}
}

// expectedVisits is the rule of docs/intake.md#visits computed directly: each
// visitor's events sorted by time (at equal times, by the tie-breaks:
// path, referrer, landing values), cut into sessions, each attribute taken
// from the first or last event that has it.
func expectedVisits(events []IngestEvent) map[string][]string {
	by := map[string][]IngestEvent{}
	for _, e := range events {
		e.TS = e.TS.Truncate(time.Millisecond)
		by[e.AnonID] = append(by[e.AnonID], e)
	}
	out := map[string][]string{}
	for anon, list := range by {
		slices.SortStableFunc(list, func(a, b IngestEvent) int { return a.TS.Compare(b.TS) })
		var sessions [][]IngestEvent
		for i, e := range list {
			if i == 0 || e.TS.Sub(list[i-1].TS) > sessionGap {
				sessions = append(sessions, nil)
			}
			sessions[len(sessions)-1] = append(sessions[len(sessions)-1], e)
		}
		for _, s := range sessions {
			start, end := s[0].TS, s[len(s)-1].TS
			var entry, exit, ref string
			var entryAt, exitAt, refAt time.Time
			pvs := 0
			var land landing
			for i, e := range s {
				if e.Type == "pageview" {
					pvs++
					p := PagePath(deref(e.URL))
					if entry == "" || e.TS.Before(entryAt) || e.TS.Equal(entryAt) && p < entry {
						entry, entryAt = p, e.TS
					}
					if exit == "" || e.TS.After(exitAt) || e.TS.Equal(exitAt) && p > exit {
						exit, exitAt = p, e.TS
					}
				}
				if e.Referrer != nil {
					if r := visitReferrer(e.URL, e.Referrer); r != "" && (ref == "" || e.TS.Before(refAt) || e.TS.Equal(refAt) && r < ref) {
						ref, refAt = r, e.TS
					}
				}
				if l := landingOf(&e); i == 0 || e.TS.Equal(start) && l.less(land) {
					land = l
				}
			}
			dash := func(s string) string {
				if s == "" {
					return "-"
				}
				return s
			}
			src := land.utm[0]
			if src == "" && ref != "" {
				src = strings.SplitN(ref, "/", 2)[0]
			}
			out[anon] = append(out[anon], strings.Join([]string{FormatTime(start), FormatTime(end), fmt.Sprint(len(s)),
				dash(entry), dash(exit), fmt.Sprint(pvs), dash(ref), dash(src), dash(land.utm[0]), dash(land.utm[1]), dash(land.utm[2]),
				dash(land.utm[3]), dash(land.utm[4]), dash(land.country), dash(land.city), dash(land.browser), dash(land.os), dash(land.device), "1"}, " "))
		}
	}
	return out
}

func TestPagePath(t *testing.T) {
	t.Parallel()
	tests := []struct{ url, want string }{
		{"https://shop.test/a/b?x=1#f", "/a/b"},
		{"https://shop.test", "/"},
		{"https://shop.test/", "/"},
		{"", "/"},
		{"/relative/p?q", "/relative/p"},
		{"https://shop.test/caf%C3%A9", "/café"},
		{"https://shop.test/bad%zz/x?q=1", "/bad%zz/x"},
		{"https://shop.test%zz", "/"},
		{"/bad%zz", "/bad%zz"},
		{"https://shop.test/" + strings.Repeat("é", 400), "/" + strings.Repeat("é", 255)},
	}
	for _, tt := range tests {
		if got := PagePath(tt.url); got != tt.want {
			t.Errorf("PagePath(%q): got %q, want %q", tt.url, got, tt.want)
		}
	}
}

// Whatever the URLs, referrers and times of two events, folding them in
// either order, or merging the visit of each into the other's, gives the
// same visit, and nothing panics.
func FuzzVisitOrder(f *testing.F) {
	f.Add("https://a.test/x?utm_source=s", "https://b.test/", "pageview", "https://a.test/y", "", "click", int64(0), int64(0))
	f.Add("https://a.test/%zz", "android-app://x/", "pageview", "/b", "http://[::1", "pageview", int64(5), int64(-5))
	f.Fuzz(func(t *testing.T, u1, r1, typ1, u2, r2, typ2 string, ms1, ms2 int64) {
		base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
		mk := func(u, r, typ string, ms int64) IngestEvent {
			e := IngestEvent{Type: typ, URL: &u, Referrer: &r, TS: base.Add(time.Duration(ms%100000) * time.Millisecond), Country: u, City: r}
			if len(u)%2 == 0 {
				e.Campaign = &Campaign{Source: r, Name: u}
			}
			return e
		}
		a, b := mk(u1, r1, typ1, ms1), mk(u2, r2, typ2, ms2)
		start, end := minTime(a.TS, b.TS), maxTime(a.TS, b.TS)
		fold := func(events ...IngestEvent) visit {
			v := newVisit()
			for i := range events {
				v.add(&events[i], events[i].TS)
			}
			return v
		}
		ab, ba := fold(a, b), fold(b, a)
		va, vb := fold(a), fold(b)
		va.merge(fold(b))
		vb.merge(fold(a))
		want := fmt.Sprint(ab.args(start, end))
		for _, got := range []visit{ba, va, vb} {
			if g := fmt.Sprint(got.args(start, end)); g != want {
				t.Fatalf("got %s, want %s", g, want)
			}
		}
	})
}

func TestCapText(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", visitTextMax-1)
	tests := []struct{ in, want string }{
		{"short", "short"},
		{long + "é", long},                    // é's two bytes would straddle the cut
		{long + "a€", long + "a"},             // the cut falls on a character's start
		{"\xff" + long + "bc", "\xff" + long}, // a bad byte early is kept, not a reason to cut more
		{strings.Repeat("€", 200), strings.Repeat("€", 170)},
	}
	for _, tt := range tests {
		if got := capText(tt.in); got != tt.want {
			t.Errorf("capText(%d bytes): got %d bytes %q..., want %d bytes", len(tt.in), len(got), got[max(0, len(got)-6):], len(tt.want))
		}
	}
}

// A session of before migration 0013 gets its visit from its stored
// events (visitOfEvents), the landing's campaign from its wire text: read
// by SQLite's event_raw there and decoded in Go on PostgreSQL, the same
// visit as intake computed.
func TestVisitOfEventsReadsTheLandingsCampaign(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	landing := ev("c1", "v", "pageview", 0, "https://shop.test/a", "")
	landing.Raw = []byte(`{"type":"page","anonymousId":"v","context":{"campaign":{"name":"spring","source":"news","medium":"mail"}}}`)
	landing.Campaign = ParseCampaign([]byte(`{"name":"spring","source":"news","medium":"mail"}`))
	later := ev("c2", "v", "pageview", 1, "https://shop.test/b", "")
	later.Raw = []byte(`{"type":"page","anonymousId":"v","context":{"campaign":{"name":"other","source":"later"}}}`)
	ingestAll(t, db, landing, later)

	start, end := landing.TS.Truncate(time.Millisecond), later.TS.Truncate(time.Millisecond)
	v, err := visitOfEvents(context.Background(), db.d, db.read, "s", "v", start, end, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := v.landing.utm, [5]string{"news", "mail", "spring", "", ""}; got != want {
		t.Errorf("landing utm: got %q, want %q", got, want)
	}
	if v.entry != "/a" || v.exit != "/b" || v.pageviews != 2 || !v.ready {
		t.Errorf("got entry %q exit %q pageviews %d ready %v, want /a /b 2 true", v.entry, v.exit, v.pageviews, v.ready)
	}
	stored := visitAttrs(t, db, "s", "v")
	if len(stored) != 1 || !strings.Contains(stored[0], " news mail spring - - ") {
		t.Errorf("stored visit: got %q, want the same campaign", stored)
	}
}
