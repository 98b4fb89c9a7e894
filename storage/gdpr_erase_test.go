package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// eraseFixture sends, to site s of db, n events of user u spread over
// devices d0-d2 (with an identify, so u has a profile, and a quarantined
// event of d1), and the events of visitor v, who stays.
type eraseFixture struct {
	t   *testing.T
	db  *DB
	seq int
}

func (f *eraseFixture) send(anon string, user *string, n int, quarantine bool) {
	f.t.Helper()
	at := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	var batch []IngestEvent
	for range n {
		f.seq++
		typ := []string{"pageview", "pageview", "click"}[f.seq%3]
		url := fmt.Sprintf("https://a.test/%s/page-%d?q=1", anon, f.seq%17)
		ref := "https://" + anon + ".ref.test/"
		e := IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", f.seq), SiteID: "s", Type: typ, AnonID: anon, UserID: user,
			URL: &url, Referrer: &ref, TS: at.Add(time.Duration(f.seq) * 7 * time.Minute), Raw: []byte(`{}`), Browser: "Chrome", Country: "DE"}
		if f.seq%50 == 0 && user != nil {
			e.Type, e.Traits = "identify", []byte(`{"email":"u@x"}`)
		}
		batch = append(batch, e)
	}
	var dlq []Quarantined
	if quarantine {
		dlq = append(dlq, Quarantined{ID: fmt.Sprintf("q-%d", f.seq), SiteID: "s", Payload: []byte(`{}`), Errors: `[]`, AnonID: anon, UserID: user})
	}
	if _, err := f.db.Ingest(context.Background(), batch, dlq, nil); err != nil {
		f.t.Fatal(err)
	}
}

func newEraseFixture(t *testing.T, db *DB, withSubject bool) *eraseFixture {
	return newEraseFixtureOf(t, db, withSubject, 2*eraseChunk+40)
}

// newEraseFixtureOf is newEraseFixture with perDevice events on each of
// the subject's three devices.
func newEraseFixtureOf(t *testing.T, db *DB, withSubject bool, perDevice int) *eraseFixture {
	f := &eraseFixture{t: t, db: db}
	u := "u"
	for i := range 3 {
		if withSubject {
			f.send(fmt.Sprintf("d%d", i), &u, perDevice, i == 1)
		} else {
			f.seq += perDevice
		}
		f.send("v", nil, 30, false)
	}
	return f
}

// siteState is every row of site s in the tables erasure touches, as text.
func siteState(t *testing.T, db *DB) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		`SELECT id, anon_id, user_id, ts FROM events WHERE site_id = 's' ORDER BY id`,
		`SELECT anon_id, user_id, started_at, ended_at, event_count FROM sessions WHERE site_id = 's' ORDER BY 1, 3`,
		`SELECT anon_id, user_id FROM identity_links WHERE site_id = 's' ORDER BY 1, 2`,
		`SELECT user_id FROM user_profiles WHERE site_id = 's'`,
		`SELECT id FROM dlq WHERE site_id = 's'`,
		`SELECT day, type, count FROM daily_events WHERE site_id = 's' ORDER BY 1, 2`,
		`SELECT day, sessions, duration_ms, events, bounces FROM daily_sessions WHERE site_id = 's' ORDER BY 1`,
		`SELECT day, dimension, value, count FROM daily_dimensions WHERE site_id = 's' ORDER BY 1, 2, 3`,
	} {
		rows, err := db.read.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(&b, vals...)
		}
		rows.Close()
	}
	return b.String()
}

// subjectRows counts the rows of site s that an erasure step deletes.
func subjectRows(t *testing.T, db *DB) int {
	t.Helper()
	var n int
	err := db.read.QueryRow(`SELECT (SELECT COUNT(*) FROM events WHERE site_id = 's') + (SELECT COUNT(*) FROM sessions WHERE site_id = 's')
		+ (SELECT COUNT(*) FROM dlq WHERE site_id = 's') + (SELECT COUNT(*) FROM identity_links WHERE site_id = 's')
		+ (SELECT COUNT(*) FROM user_profiles WHERE site_id = 's')`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// runSteps runs erasure jobs of e until stop says so or only the last job
// is left, checking that no job deletes more than eraseChunk rows.
func runSteps(t *testing.T, db *DB, e *eraser, stop func() bool) {
	t.Helper()
	for done := false; !done && !stop(); {
		before := subjectRows(t, db)
		err := db.writer.do(context.Background(), func(tx *writeTx) error {
			var err error
			done, err = e.step(tx)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := before - subjectRows(t, db); n > eraseChunk {
			t.Fatalf("one job deleted %d rows, want at most %d", n, eraseChunk)
		}
	}
}

// An erasure cut short after some of its jobs leaves the subject
// resolvable (links go last), and a repeat finishes it: what remains is
// exactly what a database that never saw the subject holds.
func TestEraseSubjectResumesAfterACrash(t *testing.T) {
	t.Parallel()
	clean := openTest(t, filepath.Join(t.TempDir(), "clean.db"))
	withSites(t, clean, "s")
	newEraseFixture(t, clean, false)
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	ws := withSites(t, db, "s")
	newEraseFixture(t, db, true)
	site, _ := db.Site("s")

	e := newEraser(db, "s", Subject{UserID: "u"})
	jobs := 0
	runSteps(t, db, e, func() bool { jobs++; return jobs > 3 })
	var links int
	db.read.QueryRow(`SELECT COUNT(*) FROM identity_links WHERE site_id = 's' AND user_id = 'u'`).Scan(&links)
	if links != 3 || e.counts.Events == 0 {
		t.Fatalf("after 3 jobs: got %d links and %d events erased, want 3 links kept and some events gone", links, e.counts.Events)
	}
	// The process dies here; an operator repeats the request.
	counts, err := db.EraseSubject(context.Background(), Actor{Kind: ActorSystem}, site, Subject{UserID: "u"})
	if err != nil {
		t.Fatal(err)
	}
	if counts.IdentityLinks != 3 || counts.UserProfiles != 1 || counts.Events+e.counts.Events != 3*(2*eraseChunk+40) {
		t.Fatalf("repeat: got %+v, want the rest of the events, 3 links and the profile", counts)
	}
	if got, want := siteState(t, db), siteState(t, clean); got != want {
		t.Fatalf("after the repeat:\n%s\nwant, as if never sent:\n%s", got, want)
	}
	entries, _, err := db.Audit(context.Background(), ws.ID, 10, time.Time{})
	if err != nil || len(entries) == 0 || entries[0].Action != "gdpr.delete" {
		t.Fatalf("got audit %+v (%v), want the repeat's gdpr.delete", entries, err)
	}
}

// Events the subject sends while its erasure runs, to a device the walk
// has already emptied or to a new one, are erased too.
func TestEraseSubjectCatchesEventsSentMeanwhile(t *testing.T) {
	t.Parallel()
	for _, s := range []Subject{{UserID: "u"}, {AnonID: "d0"}} {
		t.Run(s.kind(), func(t *testing.T) {
			db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
			withSites(t, db, "s")
			f := newEraseFixture(t, db, true)
			e := newEraser(db, "s", s)
			runSteps(t, db, e, func() bool { return e.phase != phaseWalk })
			u := "u"
			f.send("d0", nil, 3, true)
			if s.UserID != "" {
				f.send("d9", &u, 2, false)
			}
			runSteps(t, db, e, func() bool { return false })
			err := db.writer.do(context.Background(), func(tx *writeTx) error { return e.finish(tx) })
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{`SELECT COUNT(*) FROM events WHERE site_id = 's' AND anon_id IN ('d0', 'd9')`,
				`SELECT COUNT(*) FROM sessions WHERE site_id = 's' AND anon_id IN ('d0', 'd9')`,
				`SELECT COUNT(*) FROM dlq WHERE site_id = 's' AND anon_id IN ('d0', 'd9')`} {
				var n int
				if err := db.read.QueryRow(q).Scan(&n); err != nil || n != 0 {
					t.Errorf("%s: got %d (%v), want 0", q, n, err)
				}
			}
		})
	}
}

// A subject of at most eraseWholeRows rows is erased in one transaction
// with its audit row (docs/gdpr.md), so no reader sees it half gone; a
// larger one in steps, in one transaction too while nobody waits for the
// writer and its rows fit in eraseJobRows, else in bounded jobs. All leave
// exactly what a database that never saw the subject holds.
func TestEraseSubjectWholeOrChunked(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		perDevice int
		wantJobs  func(int64) bool
	}{
		{"small subject, one transaction", 100, func(n int64) bool { return n == 1 }},
		{"large subject within a job's rows, nobody waiting: one transaction", 2*eraseChunk + 40, func(n int64) bool { return n == 1 }},
		{"larger subject, bounded jobs", eraseJobRows/3 + eraseChunk, func(n int64) bool { return n > 1 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			state := func(withSubject bool) string {
				db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
				withSites(t, db, "s")
				newEraseFixtureOf(t, db, withSubject, tt.perDevice)
				if withSubject {
					if db.conv.done != nil {
						<-db.conv.done // no job but the test's may wait for the writer
					}
					site, _ := db.Site("s")
					counts, err := db.EraseSubject(context.Background(), Actor{Kind: ActorSystem}, site, Subject{UserID: "u"})
					if err != nil {
						t.Fatal(err)
					}
					if counts.Events != int64(3*tt.perDevice) || counts.IdentityLinks != 3 || counts.UserProfiles != 1 {
						t.Fatalf("got counts %+v, want %d events, 3 links, 1 profile", counts, 3*tt.perDevice)
					}
					if n := db.hooks.eraseJobs.Load(); !tt.wantJobs(n) {
						t.Fatalf("got %d writer jobs", n)
					}
				}
				return siteState(t, db)
			}
			if got, want := state(true), state(false); got != want {
				t.Fatalf("after erasure got\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// A subject that may still be erased whole keeps its first job's steps
// in one transaction even while other jobs wait for the writer (docs/gdpr.md):
// within eraseWholeRows rows of events, sessions and DLQ and eraseChunk links.
// Other jobs queued meanwhile are committed after it.
func TestEraseSubjectSmallIsWholeWhileOthersWait(t *testing.T) {
	t.Parallel()
	for _, s := range []Subject{{UserID: "u"}, {AnonID: "d1"}} {
		t.Run(s.kind(), func(t *testing.T) {
			db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
			withSites(t, db, "s")
			newEraseFixtureOf(t, db, true, 300) // more than one step's rows, fewer than eraseWholeRows
			site, _ := db.Site("s")
			if db.conv.done != nil {
				<-db.conv.done
			}
			var steps, queued int
			errs := make(chan error, 100)
			db.hooks.eraseStep = func(*eraser, *eraseTx) {
				steps++
				queued++
				queueIntake(db, queued, errs)
			}
			jobs := db.hooks.eraseJobs.Load()
			counts, err := db.EraseSubject(context.Background(), Actor{Kind: ActorSystem}, site, s)
			if err != nil {
				t.Fatal(err)
			}
			for range queued {
				if err := <-errs; err != nil {
					t.Fatalf("queued intake: %v", err)
				}
			}
			if n := db.hooks.eraseJobs.Load() - jobs; n != 1 || steps < 2 {
				t.Fatalf("got %d steps in %d jobs, want several steps in one job", steps, n)
			}
			if want := int64(map[bool]int{true: 900, false: 300}[s.UserID != ""]); counts.Events != want {
				t.Fatalf("got %d events erased, want %d", counts.Events, want)
			}
			if n := count(t, db, `SELECT COUNT(*) FROM events WHERE site_id = 's' AND anon_id = 'w'`); n != queued {
				t.Fatalf("got %d events of the queued intake, want %d", n, queued)
			}
		})
	}
}

// mayBeWhole holds while the first job has deleted at most eraseWholeRows
// rows of events, sessions and DLQ and passed or deleted at most
// eraseChunk links.
func TestEraseMayBeWhole(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		e    eraser
		want bool
	}{
		{"nothing yet", eraser{jobs: 1}, true},
		{"a whole subject's rows", eraser{jobs: 1, counts: SubjectCounts{Events: 700, Sessions: 200}, dlq: 100}, true},
		{"one row more", eraser{jobs: 1, counts: SubjectCounts{Events: 700, Sessions: 200}, dlq: 101}, false},
		{"a whole subject's links walked", eraser{jobs: 1, walked: eraseChunk}, true},
		{"one link more walked", eraser{jobs: 1, walked: eraseChunk + 1}, false},
		{"one link more deleted", eraser{jobs: 1, counts: SubjectCounts{IdentityLinks: eraseChunk + 1}}, false},
		{"the second job", eraser{jobs: 2}, false},
	} {
		if got := tt.e.mayBeWhole(); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

// A large erasure's job runs steps in one transaction while no other job
// waits for the writer, up to eraseJobRows rows, and rests after it only
// when one does (docs/gdpr.md). A job queued after a step ends the
// erasure's job there (it waits for one step and the commit) and makes it
// rest, and is committed like any other; in the first job, only once the
// subject has shown itself too large to be erased whole.
func TestEraseSubjectRestsOnlyWhenOthersWait(t *testing.T) {
	t.Parallel()
	perDevice := eraseJobRows/3 + eraseChunk // more rows than one job takes
	for _, tt := range []struct {
		name  string
		queue func(step int) bool // whether to queue an intake job after the step
	}{
		{"nobody waits", func(int) bool { return false }},
		{"intake waits after every step", func(int) bool { return true }},
		{"intake waits after the second step", func(step int) bool { return step == 2 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
			withSites(t, db, "s")
			newEraseFixtureOf(t, db, true, perDevice)
			site, _ := db.Site("s")
			if db.conv.done != nil {
				<-db.conv.done // no job but the test's may wait for the writer
			}

			type stepAt struct {
				job, rows int64 // the step's job, and the rows that job deleted so far
				whole     bool  // whether the subject might still be erased whole then
				// stalled: on PostgreSQL, the sweep reached a mark settled
				// before an earlier job, so the job ends (gdpr_erase_pg.go).
				stalled bool
			}
			var steps []stepAt
			var queued, rests int64
			errs := make(chan error, 100)
			jobs := db.hooks.eraseJobs.Load()
			db.hooks.eraseStep = func(e *eraser, tx *eraseTx) {
				steps = append(steps, stepAt{db.hooks.eraseJobs.Load(), tx.rows, e.mayBeWhole(), e.stalled})
				if !tt.queue(len(steps)) {
					return
				}
				queued++
				queueIntake(db, int(queued), errs)
			}
			counts, err := db.EraseSubject(context.Background(), Actor{Kind: ActorSystem}, site, Subject{UserID: "u"})
			if err != nil {
				t.Fatal(err)
			}
			if counts.Events != int64(3*perDevice) {
				t.Fatalf("got %d events erased, want %d", counts.Events, 3*perDevice)
			}
			for range queued {
				if err := <-errs; err != nil {
					t.Fatalf("queued intake: %v", err)
				}
			}
			var stored int64
			db.read.QueryRow(`SELECT COUNT(*) FROM events WHERE site_id = 's' AND anon_id = 'w'`).Scan(&stored)
			if stored != queued {
				t.Fatalf("got %d events of the queued intake, want %d", stored, queued)
			}
			// A job ends after a step with intake queued, after a step that
			// leaves no room for another within eraseJobRows, or after the
			// erasure's last step, but in the first job not while the
			// subject might still be erased whole; it rests if intake was
			// queued then.
			if steps[0].job != jobs+1 {
				t.Fatalf("got the first step in job %d, want the first job (%d)", steps[0].job, jobs+1)
			}
			var wantRests int64
			waits := false // whether intake queued during the job waits
			for i, st := range steps {
				if st.rows > eraseJobRows {
					t.Fatalf("step %d: got %d rows deleted in its job, want at most %d", i+1, st.rows, eraseJobRows)
				}
				waits = waits || tt.queue(i+1)
				last := i == len(steps)-1
				ended := !last && steps[i+1].job != st.job
				want := !last && (st.stalled || !st.whole && (waits || st.rows+eraseChunk > eraseJobRows))
				if ended != want {
					t.Fatalf("step %d (%d rows in its job): got the job ended %v, want %v", i+1, st.rows, ended, want)
				}
				if (ended || last) && waits {
					wantRests++
				}
				if ended {
					waits = false
				}
			}
			if !steps[0].whole || steps[len(steps)-1].whole {
				t.Fatalf("got steps %+v, want the first ones with the subject possibly whole, not the last", steps)
			}
			rests = db.hooks.eraseRests.Load()
			if rests != wantRests {
				t.Fatalf("got %d rests, want %d (one per job that ended with intake queued)", rests, wantRests)
			}
			if steps[len(steps)-1].job == steps[0].job {
				t.Fatalf("got all %d steps in one job, want more than one job's rows", len(steps))
			}
		})
	}
}

// A walk that ends in the erasure's first job has nothing to sweep, since
// nothing but that job has written since the erasure began: the steps go
// from the walk straight to the links (docs/gdpr.md). After a commit the
// sweep runs (TestEraseSubjectCatchesEventsSentMeanwhile).
func TestEraseSubjectSweepsOnlyAfterACommit(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	newEraseFixture(t, db, true)
	site, _ := db.Site("s")
	if db.conv.done != nil {
		<-db.conv.done // no job but the test's may wait for the writer
	}
	var phases []erasePhase
	db.hooks.eraseStep = func(e *eraser, tx *eraseTx) { phases = append(phases, e.phase) }
	jobs := db.hooks.eraseJobs.Load()
	if _, err := db.EraseSubject(context.Background(), Actor{Kind: ActorSystem}, site, Subject{UserID: "u"}); err != nil {
		t.Fatal(err)
	}
	if n := db.hooks.eraseJobs.Load() - jobs; n != 1 || len(phases) < 2 {
		t.Fatalf("got %d steps in %d jobs, want several steps in one job", len(phases), n)
	}
	for i, p := range phases {
		if p == phaseSweep {
			t.Fatalf("after step %d of %d: got the sweep phase in the erasure's first job (phases %v), want the links next", i+1, len(phases), phases)
		}
	}
	if got := phases[len(phases)-2]; got != phaseLinks {
		t.Fatalf("after the walk: got phase %d, want the links (%d)", got, phaseLinks)
	}
	if got := siteState(t, db); strings.Contains(got, "d0") || strings.Contains(got, "d1") || strings.Contains(got, "d2") {
		t.Fatalf("after the erasure the site still holds the subject's devices:\n%s", got)
	}
}

// The walk goes through a user's devices in anon id order, so a device
// linked while it runs may sort before the windows already done: the walk
// then goes over the user's devices again, and the device's events from
// before the erasure began (which the sweep of rows written since does not
// scan) are erased too.
func TestEraseSubjectWalksDevicesLinkedMeanwhile(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	f := &eraseFixture{t: t, db: db}
	u := "u"
	f.send("a0", nil, 3, false) // anonymous until the erasure runs
	for i := range eraseWalkLinks + 1 {
		f.send(fmt.Sprintf("d%04d", i), &u, 1, false)
	}
	e := newEraser(db, "s", Subject{UserID: "u"})
	runSteps(t, db, e, func() bool { return e.linkCursor != "" })
	if e.phase != phaseWalk || e.linkCursor <= "a0" {
		t.Fatalf("got phase %d at cursor %q, want the walk past a0", e.phase, e.linkCursor)
	}
	f.send("a0", &u, 1, false) // a0 is linked now, before the cursor
	runSteps(t, db, e, func() bool { return false })
	if err := db.writer.do(context.Background(), func(tx *writeTx) error { return e.finish(tx) }); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM events WHERE site_id = 's'`); n != 0 {
		t.Fatalf("got %d events left, want 0 (a0's anonymous ones too)", n)
	}
	if e.counts.Events != eraseWalkLinks+1+4 {
		t.Fatalf("got %d events erased, want %d", e.counts.Events, eraseWalkLinks+1+4)
	}
}

// The last steps of a large erasure also delete what is left and write the
// audit row, in the same transaction, when nobody waits for the writer
// then: one transaction and commit fewer. When a job waits, they commit
// and the last job runs on its own after the rest.
func TestEraseSubjectEndsInItsLastStepsJob(t *testing.T) {
	t.Parallel()
	run := func(queueAt int) (steps, jobs int64) {
		db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
		withSites(t, db, "s")
		newEraseFixture(t, db, true)
		site, _ := db.Site("s")
		if db.conv.done != nil {
			<-db.conv.done
		}
		errs := make(chan error, 1)
		db.hooks.eraseStep = func(*eraser, *eraseTx) {
			if steps++; steps != int64(queueAt) {
				return
			}
			queueIntake(db, 1, errs)
		}
		jobs = db.hooks.eraseJobs.Load()
		counts, err := db.EraseSubject(context.Background(), Actor{Kind: ActorSystem}, site, Subject{UserID: "u"})
		if err != nil {
			t.Fatal(err)
		}
		if counts.Events != 3*(2*eraseChunk+40) || counts.IdentityLinks != 3 || counts.UserProfiles != 1 {
			t.Fatalf("got counts %+v", counts)
		}
		if queueAt > 0 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		entries, _, err := db.Audit(context.Background(), site.WorkspaceID, 10, time.Time{})
		if err != nil || len(entries) == 0 || entries[0].Action != "gdpr.delete" {
			t.Fatalf("got audit %+v (%v), want gdpr.delete", entries, err)
		}
		return steps, db.hooks.eraseJobs.Load() - jobs
	}
	steps, jobs := run(0)
	// The check and every step in one job, which ends the erasure.
	if jobs != 1 {
		t.Fatalf("nobody waiting: got %d jobs for %d steps, want 1", jobs, steps)
	}
	if _, queued := run(int(steps)); queued != jobs+1 {
		t.Fatalf("a job waiting after the last step: got %d jobs, want %d (the last job on its own)", queued, jobs+1)
	}
}

// queueIntake sends another visitor's event n (to site s, or the site
// given) from a goroutine and returns once its intake job waits for the writer (an erasure step hook
// calls it, so the job arrives during the step); its error goes to errs.
func queueIntake(db *DB, n int, errs chan<- error, site ...string) {
	url := "https://a.test/other"
	e := IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-9000-%012d", n), SiteID: append(site, "s")[0], Type: "pageview", AnonID: "w",
		URL: &url, TS: time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC), Raw: []byte(`{}`)}
	go func() {
		_, err := db.Ingest(context.Background(), []IngestEvent{e}, nil, nil)
		errs <- err
	}()
	for !db.writer.Waiting() {
		time.Sleep(100 * time.Microsecond) // until the job is queued
	}
}
