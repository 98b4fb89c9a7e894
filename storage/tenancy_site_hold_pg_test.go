package storage

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// siteRows counts the rows of site left in every table a site delete
// empties, and the site's own row.
func siteRows(t *testing.T, db *DB, site string) int {
	t.Helper()
	total := 0
	for _, tb := range append(siteDataTables, siteTable{table: "sites"}) {
		col := "site_id"
		if tb.table == "sites" {
			col = "id"
		}
		var n int
		if err := db.read.QueryRow(`SELECT count(*) FROM `+db.d.stored(tb.table)+` WHERE `+col+` = ?`, site).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			t.Logf("%d rows of %s left in %s", n, site, tb.table)
		}
		total += n
	}
	return total
}

// A write on one instance racing a delete of its site on another
// (docs/postgresql.md#several-instances-on-one-database, site deletion): every
// Ingest either succeeds, and its rows go with the site, or gets ErrSiteGone,
// as on SQLite; no row of the site remains. Then the same with the writing
// instance's map stale (its listener stopped), where only the database's check
// can refuse the write.
func TestWriteRacingSiteDeleteOnAnotherInstance(t *testing.T) {
	t.Parallel()
	onlyPostgres(t, "two instances on one database")
	ctx := context.Background()
	clk := &testClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	a, b, _ := quotaInstances(t, clk)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	stored := make(chan int, 64)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			defer func() { stored <- n }()
			for i := 0; ; i++ {
				res, err := b.Ingest(ctx, []IngestEvent{{ID: fmt.Sprintf("w%d-%05d", w, i), SiteID: "s", Type: "pageview",
					AnonID: fmt.Sprintf("v%d", i%7), TS: clk.Now(), Raw: []byte(`{}`)}}, nil, nil)
				if errors.Is(err, ErrSiteGone) {
					return
				}
				if err != nil {
					errs <- err
					return
				}
				n += res.Accepted
			}
		}()
	}
	// The delete starts once every sender has stored something.
	waitUntil(t, func() bool { return siteCount(t, a, "s") >= 20 })
	site, _ := a.Site("s")
	wsOf := &Workspace{ID: site.WorkspaceID}
	if err := a.DeleteSite(ctx, Actor{Kind: ActorSystem}, wsOf, "s"); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	close(stored)
	for err := range errs {
		t.Fatalf("got %v from a write racing the delete, want success or ErrSiteGone", err)
	}
	sum := 0
	for n := range stored {
		sum += n
	}
	if sum == 0 {
		t.Fatal("got no event stored before the delete, want some")
	}
	if n := siteRows(t, a, "s"); n != 0 {
		t.Fatalf("got %d rows of the deleted site after %d events stored, want 0", n, sum)
	}

	// b's map still holds the site: only the database's check refuses.
	withSitesIn(t, a, wsOf, "t")
	waitUntil(t, func() bool { _, ok := b.Site("t"); return ok })
	b.pg.co.close()
	if err := a.DeleteSite(ctx, Actor{Kind: ActorSystem}, wsOf, "t"); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Site("t"); !ok {
		t.Fatal("got the site gone from the stale instance's map, want it still there")
	}
	_, err := b.Ingest(ctx, []IngestEvent{{ID: "late", SiteID: "t", Type: "pageview", AnonID: "v", TS: clk.Now(), Raw: []byte(`{}`)}}, nil, nil)
	if !errors.Is(err, ErrSiteGone) {
		t.Fatalf("got %v from a write into a site deleted on another instance, want ErrSiteGone", err)
	}
	if n := siteRows(t, a, "t"); n != 0 {
		t.Fatalf("got %d rows of the deleted site, want 0", n)
	}
}

// siteCount is the number of events of site.
func siteCount(t *testing.T, db *DB, site string) int {
	t.Helper()
	var n int
	if err := db.read.QueryRow(`SELECT count(*) FROM events WHERE site_id = ?`, site).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// withSitesIn creates sites in ws.
func withSitesIn(t *testing.T, db *DB, ws *Workspace, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if _, err := db.CreateSite(context.Background(), Actor{Kind: ActorSystem}, ws, id, id); err != nil {
			t.Fatal(err)
		}
	}
}
