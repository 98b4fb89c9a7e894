package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/tally-analytics/tally/importer"
	"github.com/tally-analytics/tally/storage"
)

// Run with:
//
//	go test ./server -run '^$' -bench IntakeDuringImport -benchtime 2500x
//
// BenchmarkIntakeDuringImport sends single events of site "bench" at a
// steady 500/s (as BenchmarkWriterFairness does) while an import into
// site "history" runs without pause through importer.Apply, the code path
// of both `tally import` modes: rows of 2,000 visitors over a past year,
// chunks of storage.ImportRowsChunk one writer job each. It reports site
// bench's p50, p99 and maximum latency, the import's rows/s, and the p50
// and maximum time between two chunks' commits (decoding the chunk's rows,
// its writer job and commit); "none" is the baseline without an import.
func BenchmarkIntakeDuringImport(b *testing.B) {
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(400)) // as main does
	}
	for _, withImport := range []bool{false, true} {
		name := "none"
		if withImport {
			name = "import"
		}
		b.Run(name, func(b *testing.B) {
			bt, db := startCollectorAt(b, filepath.Join(b.TempDir(), "bench.db"))
			defer bt.close()
			ctx, stop := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			var chunks []time.Duration
			var rows int64
			var importTook time.Duration
			if withImport {
				ws, _ := db.Workspace("bench")
				if _, err := db.CreateSite(ctx, storage.Actor{Kind: storage.ActorSystem}, ws, "history", "History"); err != nil {
					b.Fatal(err)
				}
				site, _ := db.Site("history")
				pr, pw := io.Pipe()
				wg.Add(2)
				go func() {
					defer wg.Done()
					enc := json.NewEncoder(pw)
					enc.Encode(importer.Header{Source: "goatcounter", Files: []string{"bench.csv"}})
					base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
					var n int64
					for ; ctx.Err() == nil; n++ {
						visitor := n % 2000
						ts := base.Add(time.Duration(n) * 15 * time.Second)
						url := "/p/" + fmt.Sprint(n%50)
						if err := enc.Encode(importer.Row{ID: fmt.Sprintf("imp-%d", n), Type: "pageview", TS: ts.Format(time.RFC3339),
							AnonID: fmt.Sprintf("v%d", visitor), URL: &url, Browser: "Firefox", OS: "Linux", DeviceType: "desktop", Country: "DE"}); err != nil {
							break
						}
					}
					var t importer.Trailer
					t.End.Rows = n
					enc.Encode(t)
					pw.Close()
				}()
				go func() {
					defer wg.Done()
					start, last := time.Now(), time.Now()
					sum, err := importer.Apply(context.Background(), db, site, storage.Actor{Kind: storage.ActorSystem}, pr, func(importer.Counts) {
						now := time.Now()
						chunks = append(chunks, now.Sub(last))
						last = now
					})
					if err != nil {
						b.Errorf("import: %v", err)
					}
					rows, importTook = sum.Rows, time.Since(start)
				}()
			}
			lat, el := load(b, bt.url, b.N, 1, 500)
			stop()
			wg.Wait()
			report(b, bt, lat, el, b.N)
			b.ReportMetric(percentile(lat, 1), "max_ms")
			if withImport {
				b.ReportMetric(float64(rows)/importTook.Seconds(), "import_rows/s")
				b.ReportMetric(percentile(chunks, 0.5), "chunk_p50_ms")
				b.ReportMetric(percentile(chunks, 1), "chunk_max_ms")
			}
		})
	}
}
