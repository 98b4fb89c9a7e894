package storage

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tally-analytics/tally/fault"

	"github.com/tally-analytics/tally/storage/internal/engine"
)

func TestWriterIsolatesFailingJobs(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 60)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = db.writer.submit(ctx, 1, func(tx *writeTx) error {
				if _, err := tx.Exec(`INSERT INTO identity_links(site_id, anon_id, user_id, created_at) VALUES ('s', ?, 'u', 0)`, fmt.Sprint(i)); err != nil {
					return err
				}
				switch i % 3 {
				case 1:
					return fault.Errorf(fault.InvalidEvent, "job %d refuses", i)
				case 2:
					if i == 2 {
						panic("job panics")
					}
				}
				return nil
			})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		wantErr := i%3 == 1 || i == 2
		if (err != nil) != wantErr {
			t.Errorf("job %d: got err %v, want error %v", i, err, wantErr)
		}
	}
	var n int
	if err := db.read.QueryRow(`SELECT COUNT(*) FROM identity_links`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 39 { // 60 jobs, 20 refused, 1 panicked
		t.Fatalf("got %d committed rows, want 39", n)
	}
}

// A full queue refuses a job at once; Close refuses new jobs but commits
// those queued before it. The test queues from its own goroutine, so the
// order is certain.
func TestWriterQueueFullAndDrainOnClose(t *testing.T) {
	t.Parallel()
	db, err := openTestDB(t, context.Background(), Options{Path: filepath.Join(t.TempDir(), "a.db"), QueueSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	insert := func(anon string) *job {
		return db.writer.newJob(1, func(tx *writeTx) error {
			_, err := tx.Exec(`INSERT INTO identity_links(site_id, anon_id, user_id, created_at) VALUES ('s', ?, 'u', 0)`, anon)
			return err
		})
	}
	release := make(chan struct{})
	started := make(chan struct{})
	go db.writer.submit(ctx, 1, func(tx *writeTx) error { close(started); <-release; return nil })
	<-started // the writer is busy; the queue (2) fills up
	queued := []*job{insert("0"), insert("1")}
	for _, j := range queued {
		if err := db.writer.Enqueue(ctx, j, false); err != nil {
			t.Fatalf("got %v queueing into a queue with room, want nil", err)
		}
	}
	if err := db.writer.submit(ctx, 1, func(*writeTx) error { return nil }); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("got %v on a full queue, want ErrQueueFull", err)
	}
	close(release)
	for _, j := range queued {
		if err := j.Wait(ctx); err != nil {
			t.Fatalf("queued job: %v", err)
		}
	}
	// Jobs queued before Close are committed; later ones are refused.
	block := make(chan struct{})
	running := make(chan struct{})
	go db.writer.submit(ctx, 1, func(tx *writeTx) error { close(running); <-block; return nil })
	<-running // the writer is inside that job, so the next one stays queued
	late := insert("late")
	if err := db.writer.Enqueue(ctx, late, false); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { db.Close(); close(closed) }()
	close(block)
	<-closed
	if err := late.Wait(ctx); err != nil {
		t.Fatalf("job queued before Close: %v", err)
	}
	if err := db.writer.submit(ctx, 1, func(*writeTx) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("got %v after Close, want ErrClosed", err)
	}
}

// testPart is a part of a testGroup job: it inserts id into table parts,
// and fails the unit it runs in if fail is set.
type testPart struct {
	id   int
	fail bool
}

// testGroup is a merge group that records how the writer runs its parts.
type testGroup struct {
	name string
	log  *[]string // one line per runMerged call
	done *[]int    // the ids committed, in the order of the commit hooks
}

func (g *testGroup) RunMerged(tx *engine.Tx, parts []any, alone bool) error {
	var ids []int
	failed := false
	for _, p := range parts {
		p := p.(testPart)
		ids = append(ids, p.id)
		failed = failed || p.fail
		if _, err := tx.Exec(`INSERT INTO parts(id) VALUES (?)`, p.id); err != nil {
			return err
		}
	}
	line := fmt.Sprint(g.name, ids)
	if alone {
		line = "alone " + line
	}
	*g.log = append(*g.log, line)
	if failed {
		return errors.New("a part fails")
	}
	tx.OnCommit(func() { *g.done = append(*g.done, ids...) })
	return nil
}

// The writer is generic: whatever group a job belongs to, a batch of one
// group's jobs runs as one merged unit alone in its transaction, and if
// that fails, again job by job; in any other batch, plain jobs run alone
// and each run of consecutive jobs of one group runs merged, then job by
// job should it fail. Only failing jobs fail, everything else commits, and
// the commit hooks run in the order of the jobs.
func TestWriterMergedRuns(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "it drives the writer from the test goroutine, which needs the writer idle; on PostgreSQL the listener queues tenancy reloads on the writer at any time")
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	ctx := context.Background()
	if err := db.writer.do(ctx, func(tx *writeTx) error {
		_, err := tx.Exec(`CREATE TABLE parts(id INTEGER)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var log []string
	var done []int
	a := &testGroup{name: "a", log: &log, done: &done}
	b := &testGroup{name: "b", log: &log, done: &done}
	part := func(g *testGroup, id int) *job {
		return engine.NewPart(g, testPart{id: id}, 1)
	}
	failing := func(g *testGroup, id int) *job {
		return engine.NewPart(g, testPart{id: id, fail: true}, 1)
	}
	plain := func(id int, fail bool) *job {
		return db.writer.newJob(1, func(tx *writeTx) error {
			if _, err := tx.Exec(`INSERT INTO parts(id) VALUES (?)`, id); err != nil {
				return err
			}
			if fail {
				return errors.New("a plain job fails")
			}
			tx.OnCommit(func() { done = append(done, id) })
			return nil
		})
	}
	cases := []struct {
		name   string
		batch  []*job
		log    []string
		txs    uint64 // transactions begun
		done   []int
		failed []int // indexes into batch
	}{
		{"one group", []*job{part(a, 1), part(a, 2), part(a, 3)},
			[]string{"alone a[1 2 3]"}, 1, []int{1, 2, 3}, nil},
		{"one group, one part fails", []*job{part(a, 1), failing(a, 2), part(a, 3)},
			[]string{"alone a[1 2 3]", "a[1]", "a[2]", "a[3]"}, 2, []int{1, 3}, []int{1}},
		{"one lone failing part", []*job{failing(a, 1)},
			[]string{"alone a[1]", "a[1]"}, 2, nil, []int{0}},
		{"mixed", []*job{plain(1, false), part(a, 2), part(a, 3), plain(4, false), part(a, 5)},
			[]string{"a[2 3]", "a[5]"}, 1, []int{1, 2, 3, 4, 5}, nil},
		{"mixed, a run fails", []*job{plain(1, false), part(a, 2), failing(a, 3), part(a, 4), plain(5, true)},
			[]string{"a[2 3 4]", "a[2]", "a[3]", "a[4]"}, 1, []int{1, 2, 4}, []int{2, 4}},
		{"mixed, a run of one fails", []*job{plain(1, false), failing(a, 2)},
			[]string{"a[2]"}, 1, []int{1}, []int{1}},
		{"two groups", []*job{part(a, 1), part(a, 2), part(b, 3)},
			[]string{"a[1 2]", "b[3]"}, 1, []int{1, 2, 3}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			log, done = nil, nil
			seq := db.writer.Seq()
			// The writer goroutine is idle: commit runs the batch as it
			// would a queue that held these jobs.
			db.writer.CommitNow(c.batch)
			var failed []int
			for i, j := range c.batch {
				if err := j.Wait(context.Background()); err != nil {
					failed = append(failed, i)
				}
			}
			if fmt.Sprint(log) != fmt.Sprint(c.log) {
				t.Errorf("got runs %q, want %q", log, c.log)
			}
			if got := db.writer.Seq() - seq; got != c.txs {
				t.Errorf("got %d transactions, want %d", got, c.txs)
			}
			if fmt.Sprint(done) != fmt.Sprint(c.done) {
				t.Errorf("got commit hooks of %v, want %v", done, c.done)
			}
			if fmt.Sprint(failed) != fmt.Sprint(c.failed) {
				t.Errorf("got failed jobs %v, want %v", failed, c.failed)
			}
			var stored []int
			rows, err := db.write.Query(`SELECT id FROM parts ORDER BY id`)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var id int
				rows.Scan(&id)
				stored = append(stored, id)
			}
			rows.Close()
			if fmt.Sprint(stored) != fmt.Sprint(c.done) {
				t.Errorf("got rows %v stored, want %v", stored, c.done)
			}
			if _, err := db.write.Exec(`DELETE FROM parts`); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Only a commit of a job that surely wrote pages proves the database
// writable: one of jobs that did not say so, or whose job failed, leaves
// the write health as it was.
func TestWriterHealthCountsOnlyWrites(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	ctx := context.Background()
	cases := []struct {
		name string
		fn   func(*writeTx) error
		want bool
	}{
		{"a job that changed nothing", func(*writeTx) error { return nil }, false},
		{"a job that wrote and failed", func(tx *writeTx) error { tx.MarkWritten(); return errors.New("fails") }, false},
		{"a job that wrote", func(tx *writeTx) error { tx.MarkWritten(); return nil }, true},
	}
	for _, c := range cases {
		before := db.writer.LastWrite()
		db.writer.submit(ctx, 1, c.fn)
		after := db.writer.LastWrite()
		if got := after.After(before); got != c.want {
			t.Errorf("%s: got health refreshed %v, want %v", c.name, got, c.want)
		}
	}
}

// A job submitted with doOwn runs in a transaction of its own, without the
// savepoint of a batch's plain jobs, between the jobs queued before and
// after it; failing, it is rolled back whole and the others commit.
func TestWriterOwnTransaction(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "the listener's reloads queue writer jobs on PostgreSQL: the queue's length is not the test's to count")
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("fails %v", fail), func(t *testing.T) {
			db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
			ctx := context.Background()
			// A job holds the writer while three more are queued behind it.
			started, release := make(chan struct{}), make(chan struct{})
			blocker := make(chan error, 1)
			go func() {
				blocker <- db.writer.do(ctx, func(tx *writeTx) error { close(started); <-release; return nil })
			}()
			<-started
			var seqs [3]uint64
			var inSavepoint bool
			results := make([]chan error, 3)
			for i := range results {
				results[i] = make(chan error, 1)
				fn := func(tx *writeTx) error {
					seqs[i] = tx.Seq
					if _, err := tx.Exec(`INSERT INTO identity_links(site_id, anon_id, user_id, created_at) VALUES ('s', ?, 'u', 0)`, fmt.Sprint(i)); err != nil {
						return err
					}
					if i == 1 {
						// The probe's own savepoint undoes the failed statement,
						// which aborts the transaction on PostgreSQL.
						if _, err := tx.Exec(`SAVEPOINT probe`); err != nil {
							return err
						}
						_, err := tx.Exec(`ROLLBACK TO job`) // fails unless in the savepoint "job"
						inSavepoint = err == nil
						if err != nil {
							if _, err := tx.Exec(`ROLLBACK TO probe`); err != nil {
								return err
							}
							if _, err := tx.Exec(`RELEASE probe`); err != nil {
								return err
							}
						}
						if fail {
							return errors.New("the own job fails")
						}
					}
					return nil
				}
				go func() {
					if i == 1 {
						results[i] <- db.writer.doOwn(ctx, fn)
					} else {
						results[i] <- db.writer.do(ctx, fn)
					}
				}()
				for db.writer.Queued() != i+1 {
					time.Sleep(100 * time.Microsecond) // until the job is queued
				}
			}
			close(release)
			if err := <-blocker; err != nil {
				t.Fatal(err)
			}
			for i, r := range results {
				if err := <-r; (err != nil) != (fail && i == 1) {
					t.Fatalf("job %d: got %v, want an error %v", i, err, fail && i == 1)
				}
			}
			if inSavepoint {
				t.Fatal("the own job ran in a savepoint")
			}
			if seqs[0] == seqs[1] || seqs[1] == seqs[2] {
				t.Fatalf("got transactions %v, want the own job's (the second) apart from the others'", seqs)
			}
			var n int
			db.read.QueryRow(`SELECT COUNT(*) FROM identity_links`).Scan(&n)
			if want := map[bool]int{false: 3, true: 2}[fail]; n != want {
				t.Fatalf("got %d rows, want %d", n, want)
			}
		})
	}
}

// busy counts the jobs queued or running: a job the writer has taken from
// its queue is no longer waiting but still busy, until it is answered.
func TestWriterBusy(t *testing.T) {
	t.Parallel()
	onlySQLite(t, "it drives the writer from the test goroutine, which needs the writer idle; on PostgreSQL the listener queues tenancy reloads on the writer at any time")
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	ctx := context.Background()
	if db.conv.done != nil {
		<-db.conv.done // the background conversion's jobs, if any, are over
	}
	if db.writer.Busy() || db.writer.Waiting() {
		t.Fatal("got an idle writer busy")
	}
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- db.writer.do(ctx, func(tx *writeTx) error { close(started); <-release; return nil })
	}()
	<-started
	if got := [2]bool{db.writer.Waiting(), db.writer.Busy()}; got != [2]bool{false, true} {
		t.Fatalf("while a job runs: got waiting, busy %v, want [false true]", got)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if db.writer.Busy() {
		t.Fatal("got the writer busy after its only job was answered")
	}
	if err := db.writer.submit(ctx, 1, func(tx *writeTx) error { return errors.New("refused") }); err == nil {
		t.Fatal("got no error from a failing job")
	}
	if db.writer.Busy() {
		t.Fatal("got the writer busy after a failed job was answered")
	}
}
