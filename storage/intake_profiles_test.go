package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// identifies returns n identify events of site s, user i%users each,
// numbered from *seq on, with the traits traits(k) for the k-th.
func identifies(seq *int, n, users int, traits func(k int) string) []IngestEvent {
	evs := make([]IngestEvent, n)
	for k := range evs {
		*seq++
		user := fmt.Sprint("u", k%users)
		evs[k] = IngestEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", *seq), SiteID: "s", Type: "identify",
			AnonID: "a-" + user, UserID: &user, Traits: []byte(traits(*seq)),
			TS: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC).Add(time.Duration(*seq) * time.Millisecond), Raw: []byte(`{}`)}
	}
	return evs
}

// storedTraits is the profile text of user.
func storedTraits(t *testing.T, db *DB, user string) string {
	t.Helper()
	var s string
	if err := db.read.QueryRow(`SELECT traits FROM user_profiles WHERE site_id = 's' AND user_id = ?`, user).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestProfileCappedAcrossBatches sends what issue 29 found stalling the
// writer: batches of identifies of one user, each with 3 new traits, in
// jobs of 500 as a 2,500-message Segment batch is stored. The profile
// stays within MaxProfileTraits and MaxProfileBytes, every event is
// stored, and each trait the profile did not take is named.
func TestProfileCappedAcrossBatches(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	seq := 0
	three := func(k int) string {
		return fmt.Sprintf(`{"plan":"p%d","t%d_a":"%s","t%d_b":%d,"t%d_c":true}`, k, k, strings.Repeat("v", 20), k, k, k)
	}
	sent, dropped := 0, 0
	for batch := range 4 {
		for job := range 5 {
			res, err := db.Ingest(context.Background(), identifies(&seq, 500, 1, three), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Accepted != 500 {
				t.Fatalf("batch %d job %d: got %d accepted, want 500", batch, job, res.Accepted)
			}
			for _, names := range res.TraitsDropped {
				for _, n := range names {
					if !strings.HasPrefix(n, "t") {
						t.Fatalf("got %q dropped, want only new traits dropped", n)
					}
				}
				dropped += len(names)
			}
			sent += 500 * 3
		}
		traits := storedTraits(t, db, "u0")
		var m map[string]any
		if err := json.Unmarshal([]byte(traits), &m); err != nil {
			t.Fatal(err)
		}
		if len(traits) > MaxProfileBytes || len(m) > MaxProfileTraits {
			t.Fatalf("after batch %d: got %d bytes and %d traits, want at most %d and %d", batch, len(traits), len(m), MaxProfileBytes, MaxProfileTraits)
		}
		if want := fmt.Sprintf("p%d", seq); m["plan"] != want {
			t.Fatalf("after batch %d: got plan %v, want %s (an existing trait still changes)", batch, m["plan"], want)
		}
		if kept := len(m) - 1; kept+dropped != sent {
			t.Fatalf("after batch %d: got %d new traits kept and %d named dropped, want %d in all", batch, kept, dropped, sent)
		}
	}
}

// TestProfileWrittenOncePerRun checks that a run reads and writes each
// profile once, however many identifies of its user it holds: 500 of them
// used to rewrite the whole profile 500 times.
func TestProfileWrittenOncePerRun(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	type run struct{ read, written int64 }
	var runs []run
	db.hooks.profileRunBytes = func(read, written int64) { runs = append(runs, run{read, written}) }
	seq := 0
	before := 0
	for i := range 3 {
		runs = nil
		evs := identifies(&seq, 500, 1, func(k int) string { return fmt.Sprintf(`{"n":%d,"k%d":1}`, k, k%400) })
		if _, err := db.Ingest(context.Background(), evs, nil, nil); err != nil {
			t.Fatal(err)
		}
		after := len(storedTraits(t, db, "u0"))
		var all run
		for _, r := range runs {
			all.read += r.read
			all.written += r.written
		}
		if len(runs) != 1 || all != (run{int64(before), int64(after)}) {
			t.Fatalf("call %d: got %d runs that read %d bytes and wrote %d, want one that read %d and wrote %d",
				i, len(runs), all.read, all.written, before, after)
		}
		before = after
	}
}

// TestJobsBoundProfileBytes stores a 2,500-message request of identifies
// of 400 users whose profiles are near the cap in the jobs JobLength cuts,
// and checks that no job reads or writes more than MaxJobProfiles
// profiles' worth of traits.
func TestJobsBoundProfileBytes(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	ctx := context.Background()
	const users = 400
	big := func(k int) string { // about 31 KB
		var b strings.Builder
		b.WriteString(`{`)
		for i := range 900 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"k%03d":"%023d"`, i, k)
		}
		return b.String() + `}`
	}
	store := func(evs []IngestEvent, check func(read, written int64)) int {
		db.hooks.profileRunBytes = check
		jobs := 0
		for len(evs) > 0 {
			n := JobLength(evs, 500)
			if _, err := db.Ingest(ctx, evs[:n], nil, nil); err != nil {
				t.Fatal(err)
			}
			evs = evs[n:]
			jobs++
		}
		return jobs
	}
	seq := 0
	store(identifies(&seq, users, users, big), nil)
	const bound = 2 * MaxJobProfiles * MaxProfileBytes // read and written
	worst := int64(0)
	jobs := store(identifies(&seq, 2500, users, func(k int) string { return fmt.Sprintf(`{"k001":"%023d"}`, k) }),
		func(read, written int64) { worst = max(worst, read+written) })
	if worst > bound || worst < bound/2 {
		t.Fatalf("got a job of %d profile bytes, want at most %d and near it", worst, bound)
	}
	if want := 2500 / MaxJobProfiles; jobs < want {
		t.Fatalf("got %d jobs, want at least %d", jobs, want)
	}
}
