package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tally-analytics/tally/internal/dbtest"
)

// sessionRow is one row of sessions as the tests compare it.
type sessionRow struct {
	anon       string
	start, end string
	count      int64
}

// expectedSessions is the contract's rule computed directly: a visitor's
// events sorted by time, cut where two follow each other by more than
// sessionGap.
func expectedSessions(events []IngestEvent) []sessionRow {
	byAnon := map[string][]time.Time{}
	for _, e := range events {
		byAnon[e.AnonID] = append(byAnon[e.AnonID], e.TS.Truncate(time.Millisecond))
	}
	var rows []sessionRow
	for anon, ts := range byAnon {
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		cur := sessionRow{anon: anon, start: FormatTime(ts[0]), end: FormatTime(ts[0]), count: 1}
		last := ts[0]
		for _, t := range ts[1:] {
			if t.Sub(last) > sessionGap {
				rows = append(rows, cur)
				cur = sessionRow{anon: anon, start: FormatTime(t), count: 0}
			}
			cur.end = FormatTime(t)
			cur.count++
			last = t
		}
		rows = append(rows, cur)
	}
	sortSessions(rows)
	return rows
}

func sortSessions(rows []sessionRow) {
	slices.SortFunc(rows, func(a, b sessionRow) int {
		if a.anon != b.anon {
			return compareStrings(a.anon, b.anon)
		}
		return compareStrings(a.start, b.start)
	})
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Sessions and their daily rollup come out as the rule says however the
// events arrive: shuffled, in requests of any size, committed together or
// apart, with other writes (which empty the newest-session memo) and
// duplicates in between.
func TestSessionsWhateverTheArrival(t *testing.T) {
	t.Parallel()
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			base := time.Date(2026, 2, 27, 22, 0, 0, 0, time.UTC) // crosses midnight
			var events []IngestEvent
			for v := range 12 {
				at := base.Add(time.Duration(rng.IntN(60)) * time.Minute)
				for range 10 + rng.IntN(30) {
					gaps := []time.Duration{time.Second, 5 * time.Minute, 29 * time.Minute, sessionGap, sessionGap + time.Millisecond, 2 * time.Hour}
					at = at.Add(gaps[rng.IntN(len(gaps))])
					events = append(events, IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", len(events)),
						SiteID: "s", Type: "pageview", AnonID: fmt.Sprintf("v%d", v), TS: at, Raw: []byte(`{}`)})
				}
			}
			want := expectedSessions(events)

			db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
			withSites(t, db, "s")
			ctx := context.Background()
			shuffled := slices.Clone(events)
			rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			var requests [][]IngestEvent
			for len(shuffled) > 0 {
				n := min(1+rng.IntN(8), len(shuffled))
				req := slices.Clone(shuffled[:n])
				if rng.IntN(5) == 0 { // a redelivery of an earlier event
					req = append(req, events[rng.IntN(len(events))])
				}
				requests = append(requests, req)
				shuffled = shuffled[n:]
			}
			// Waves of concurrent requests commit together (merged runs);
			// an unrelated write now and then makes a mixed transaction.
			for len(requests) > 0 {
				wave := requests[:min(1+rng.IntN(6), len(requests))]
				requests = requests[len(wave):]
				var wg sync.WaitGroup
				errs := make(chan error, len(wave)+1)
				for _, req := range wave {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, err := db.Ingest(ctx, req, nil, nil)
						errs <- err
					}()
				}
				if rng.IntN(4) == 0 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						errs <- db.writer.do(ctx, func(tx *writeTx) error {
							_, err := tx.Exec(`INSERT INTO daily_salts(day, salt) VALUES ('2000-01-01', ?) ON CONFLICT DO NOTHING`, []byte{0})
							return err
						})
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != nil {
						t.Fatal(err)
					}
				}
			}

			got := storedSessions(t, db)
			if !slices.Equal(got, want) {
				t.Fatalf("got %d sessions, want %d:\ngot  %v\nwant %v", len(got), len(want), got, want)
			}

			// The daily rollup agrees with the sessions themselves.
			days := map[string][4]int64{}
			for _, r := range want {
				start, _ := time.Parse(timeLayout, r.start)
				end, _ := time.Parse(timeLayout, r.end)
				d := days[r.start[:10]]
				d[0]++
				d[1] += end.Sub(start).Milliseconds()
				d[2] += r.count
				if r.count == 1 {
					d[3]++
				}
				days[r.start[:10]] = d
			}
			rows, err := db.read.Query(`SELECT day, sessions, duration_ms, events, bounces FROM daily_sessions WHERE sessions != 0`)
			if err != nil {
				t.Fatal(err)
			}
			gotDays := map[string][4]int64{}
			for rows.Next() {
				var day string
				var d [4]int64
				if err := rows.Scan(&day, &d[0], &d[1], &d[2], &d[3]); err != nil {
					t.Fatal(err)
				}
				gotDays[day] = d
			}
			rows.Close()
			if fmt.Sprint(gotDays) != fmt.Sprint(days) {
				t.Fatalf("got daily sessions %v, want %v", gotDays, days)
			}
		})
	}
}

// An event far in the past of a visitor with very many later sessions
// reads only the sessions it can touch and the visitor's newest (for the
// memo), not every later one, so it cannot hold the writer; a batch spread
// across years stays bounded too. The sessions still come out as the rule
// says, and the daily rollup agrees with them.
func TestSessionsOfAVisitorWithManySessions(t *testing.T) {
	dbtest.SkipUnderRace(t, "data-heavy answers compared in one goroutine")
	t.Parallel()
	const stored = 100_000
	const spacing = 50 * time.Minute // more than sessionGap, less than twice it
	base := time.Date(2016, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(k int) time.Time { return base.Add(time.Duration(k) * spacing) }

	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	ctx := context.Background()
	// Sessions of one event each, 50 minutes apart, and their rollup,
	// written directly: intake of 100,000 events would take far longer.
	err := db.writer.do(ctx, func(tx *writeTx) error {
		// Portable SQL: the times computed in Go, the rollup written by
		// the dialect's upsert (PostgreSQL's goes to this instance's slot).
		if _, err := tx.Exec(`WITH RECURSIVE k(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM k WHERE n + 1 < ?)
			INSERT INTO sessions(site_id, anon_id, start_text, end_text, start_ms, duration_ms, event_count)
			SELECT 's', 'v', '', '', CAST(? AS BIGINT) + n * CAST(? AS BIGINT), 0, 1 FROM k`,
			stored, base.UnixMilli(), spacing.Milliseconds()); err != nil {
			return err
		}
		rows, err := tx.Query(`SELECT substr(started_at, 1, 10), COUNT(*) FROM sessions GROUP BY 1 ORDER BY 1`)
		if err != nil {
			return err
		}
		days := map[string]int{}
		for rows.Next() {
			var day string
			var n int
			if err := rows.Scan(&day, &n); err != nil {
				rows.Close()
				return err
			}
			days[day] = n
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		upsert := db.d.rollupUpsertSQL("daily_sessions", []string{"site_id", "day"}, []string{"sessions", "duration_ms", "events", "bounces"}, db.pg.slot)
		for day, n := range days {
			if _, err := tx.Exec(upsert, "s", day, n, 0, n, n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var all []IngestEvent
	for k := range stored {
		all = append(all, IngestEvent{AnonID: "v", TS: at(k)})
	}

	spread := make([]time.Duration, 500) // one event every 199 sessions, each bridging two
	for i := range spread {
		spread[i] = time.Duration(i*199)*spacing + 25*time.Minute
	}
	cases := []struct {
		name    string
		offsets []time.Duration // from base
		maxRead int64
	}{
		{"bridges two sessions in the middle", []time.Duration{50_000*spacing + 25*time.Minute}, 4},
		{"joins one session in the middle", []time.Duration{30_000*spacing + 10*time.Minute}, 4},
		{"after a session bridged by an earlier event", []time.Duration{50_001*spacing + 25*time.Minute}, 4},
		{"before every session", []time.Duration{-365 * 24 * time.Hour}, 4},
		{"a batch of 500 spread across the years", spread, 3*500 + 1},
	}
	n := 0
	for _, c := range cases {
		var events []IngestEvent
		for _, off := range c.offsets {
			events = append(events, IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), SiteID: "s",
				Type: "pageview", AnonID: "v", TS: base.Add(off), Raw: []byte(`{}`)})
			n++
		}
		all = append(all, events...)
		before := db.hooks.sessionRowsRead.Load()
		if _, err := db.Ingest(ctx, events, nil, nil); err != nil {
			t.Fatal(err)
		}
		if read := db.hooks.sessionRowsRead.Load() - before; read > c.maxRead {
			t.Errorf("%s: got %d session rows read, want at most %d", c.name, read, c.maxRead)
		}

		got := storedSessions(t, db)
		want := expectedSessions(all)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: got %d sessions, want %d", c.name, len(got), len(want))
		}
		if got, want := dailySessions(t, db), rollupOf(want); got != want {
			t.Fatalf("%s: got daily sessions %.300s…, want %.300s…", c.name, got, want)
		}
	}
}

// rollupOf is the daily session rollup of rows, as dailySessions prints it.
func rollupOf(rows []sessionRow) string {
	days := map[string][4]int64{}
	for _, r := range rows {
		start, _ := time.Parse(timeLayout, r.start)
		end, _ := time.Parse(timeLayout, r.end)
		d := days[r.start[:10]]
		d[0]++
		d[1] += end.Sub(start).Milliseconds()
		d[2] += r.count
		if r.count == 1 {
			d[3]++
		}
		days[r.start[:10]] = d
	}
	return fmt.Sprint(days)
}

// dailySessions prints the non-empty days of the daily_sessions table.
func dailySessions(t *testing.T, db *DB) string {
	t.Helper()
	rows, err := db.read.Query(`SELECT day, sessions, duration_ms, events, bounces FROM daily_sessions WHERE sessions != 0`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	days := map[string][4]int64{}
	for rows.Next() {
		var day string
		var d [4]int64
		if err := rows.Scan(&day, &d[0], &d[1], &d[2], &d[3]); err != nil {
			t.Fatal(err)
		}
		days[day] = d
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(days)
}

// storedSessions reads every session row, sorted as sortSessions does.
func storedSessions(t *testing.T, db *DB) []sessionRow {
	t.Helper()
	rows, err := db.read.Query(`SELECT anon_id, started_at, ended_at, event_count FROM sessions`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []sessionRow
	for rows.Next() {
		var r sessionRow
		if err := rows.Scan(&r.anon, &r.start, &r.end, &r.count); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	sortSessions(got)
	return got
}
