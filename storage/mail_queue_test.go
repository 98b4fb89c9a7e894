package storage

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// A mail is enqueued once per key; a claim holds until its lease ends,
// when another claim takes the mail over (a sender that crashed), and
// the first claim's mark is then refused.
func TestMailQueueClaimsAndLeases(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Date(2026, 2, 2, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	db, err := openTestDB(t, context.Background(), Options{Path: filepath.Join(t.TempDir(), "t.db"), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	m := OutboxMail{Kind: MailWeekly, SiteID: "web", Recipient: "Ana@Example.com", Period: "2026-01-26/2026-02-01", Message: []byte("Subject: x\r\n\r\nx\r\n")}
	for i, want := range []bool{true, false} {
		if got, err := db.EnqueueMail(ctx, m); err != nil || got != want {
			t.Fatalf("enqueue %d: got %v (%v), want %v", i, got, err, want)
		}
	}
	m.Recipient = "ana@example.com" // the same address, whatever its case
	if got, _ := db.EnqueueMail(ctx, m); got {
		t.Fatalf("got the same mail enqueued again under another case of its address")
	}
	if q, _ := db.MailQueued(ctx, MailWeekly, "web", "ANA@example.com", m.Period); !q {
		t.Fatalf("got MailQueued false for an enqueued mail")
	}
	first, err := db.ClaimMail(ctx, time.Minute)
	if err != nil || first == nil || first.Recipient != "Ana@Example.com" || string(first.Message) != string(m.Message) {
		t.Fatalf("got %+v (%v), want the mail", first, err)
	}
	if c, _ := db.ClaimMail(ctx, time.Minute); c != nil {
		t.Fatalf("claimed a mail under another claim's lease")
	}
	advance(time.Minute)
	second, err := db.ClaimMail(ctx, time.Minute)
	if err != nil || second == nil || second.ID != first.ID {
		t.Fatalf("got %+v (%v) after the lease ended, want the same mail claimed again", second, err)
	}
	if err := db.MailDone(ctx, first); !ErrMailLeaseLost(err) {
		t.Fatalf("got %v marking under an ended lease, want the lease lost", err)
	}
	if err := db.MailDone(ctx, second); err != nil {
		t.Fatal(err)
	}
	advance(time.Hour)
	if c, _ := db.ClaimMail(ctx, time.Minute); c != nil {
		t.Fatalf("claimed a sent mail")
	}
	rows, _ := db.MailOutbox(ctx, "web")
	if len(rows) != 1 || rows[0].Status != MailSent || rows[0].Attempts != 1 {
		t.Fatalf("got %+v, want one sent row, one attempt", rows)
	}
}

// Of many claims at once, one gets each mail.
func TestMailQueueConcurrentClaims(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "t.db"))
	ctx := context.Background()
	for _, to := range []string{"a@example.com", "b@example.com", "c@example.com"} {
		if _, err := db.EnqueueMail(ctx, OutboxMail{Kind: MailWeekly, SiteID: "web", Recipient: to, Period: "p", Message: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := db.ClaimMail(ctx, time.Hour)
				if err != nil {
					t.Error(err)
					return
				}
				if c == nil {
					return
				}
				mu.Lock()
				got[c.ID]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(got) != 3 {
		t.Fatalf("got %d mails claimed, want 3", len(got))
	}
	for id, n := range got {
		if n != 1 {
			t.Errorf("mail %s claimed %d times, want 1", id, n)
		}
	}
}
