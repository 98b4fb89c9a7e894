package server

import (
	"context"
	"testing"
	"time"

	"github.com/tally-analytics/tally/storage"
)

// importHistory writes days days of imported history for site ending on
// last, through storage's import writes (the importer package parses the
// products' files into them): per day, 10 visitors on / from Google, the
// n-th day's figures n times those of the first.
func importHistory(t *testing.T, db *storage.DB, site, last string, days int) {
	t.Helper()
	ctx := context.Background()
	end, err := time.Parse(time.DateOnly, last)
	if err != nil {
		t.Fatal(err)
	}
	im, err := db.BeginImport(ctx, site, "plausible", []string{"imported_visitors.csv"})
	if err != nil {
		t.Fatal(err)
	}
	var rows []storage.ImportedRow
	for i := 1; i <= days; i++ {
		day := end.AddDate(0, 0, i-days).Format(time.DateOnly)
		n := int64(i)
		for _, dv := range [][2]string{{"", ""}, {"visit:source", "Google"}, {"event:page", "/"}} {
			rows = append(rows, storage.ImportedRow{Day: day, Dim: dv[0], Value: dv[1], Visitors: 10 * n, Visits: 12 * n,
				Pageviews: 30 * n, Events: 30 * n, Bounces: 4 * n, Duration: 600 * n})
		}
	}
	if err := im.Add(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if err := im.Finish(ctx, int64(days), nil); err != nil {
		t.Fatal(err)
	}
}
