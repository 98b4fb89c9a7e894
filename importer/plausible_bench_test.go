package importer_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/tally-analytics/tally/importer"
)

// BenchmarkPlausibleImport imports a synthetic export of a busy year (365
// days; a day holds 50 sources, 500 pages, 100 entry and 100 exit pages, 50
// countries, 4 devices, 20 browsers, 10 systems and 10 custom events:
// 308,000 CSV rows) while single events are sent to the collector every
// 5 ms, and reports the import's time and the intake latencies during it
// and alone (docs/import.md).
//
//	go test ./importer -run '^$' -bench PlausibleImport -benchtime 1x
func BenchmarkPlausibleImport(b *testing.B) {
	dir := b.TempDir()
	files := writeBigExport(b, dir)
	var size int64
	for _, f := range files {
		st, _ := os.Stat(f)
		size += st.Size()
	}
	for i := 0; i < b.N; i++ {
		t := &testing.T{}
		r := newRig(t)
		r.t = t
		r.site("shop")
		alone := sendEvery(r, "shop", 5*time.Millisecond, 2*time.Second)
		stop := make(chan struct{})
		var during []time.Duration
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); during = sendUntil(r, "shop", 5*time.Millisecond, stop) }()
		var gaps []time.Duration
		last := time.Now()
		start := time.Now()
		n, err := importer.Plausible(context.Background(), r.db, "shop", files, func(done, total int64) {
			now := time.Now()
			gaps = append(gaps, now.Sub(last))
			last = now
		})
		took := time.Since(start)
		close(stop)
		wg.Wait()
		if err != nil {
			b.Fatal(err)
		}
		rollup := r.count(`SELECT COUNT(*) FROM imported_rows`)
		b.ReportMetric(took.Seconds(), "s/import")
		b.ReportMetric(float64(n)/took.Seconds(), "csvrows/s")
		fmt.Printf("import: %d CSV rows (%.1f MB), %d rollup rows, %.1f s, %d writer jobs; between jobs p50 %v p99 %v max %v\n",
			n, float64(size)/1e6, rollup, took.Seconds(), len(gaps), pct(gaps, 50), pct(gaps, 99), pct(gaps, 100))
		fmt.Printf("intake alone: %d events p50 %v p99 %v max %v\n", len(alone), pct(alone, 50), pct(alone, 99), pct(alone, 100))
		fmt.Printf("intake during import: %d events p50 %v p99 %v max %v\n", len(during), pct(during, 50), pct(during, 99), pct(during, 100))
		rd, _ := r.rows("shop", map[string]any{"metrics": []string{"visitors", "pageviews"}, "date_range": []string{"2025-01-01", "2025-12-31"},
			"dimensions": []string{"event:page"}, "include": map[string]any{"imports": true}, "pagination": map[string]any{"limit": 1}})
		qs := time.Now()
		r.rows("shop", map[string]any{"metrics": []string{"visitors", "pageviews"}, "date_range": []string{"2025-01-01", "2025-12-31"},
			"dimensions": []string{"event:page"}, "include": map[string]any{"imports": true}, "pagination": map[string]any{"limit": 1}})
		fmt.Printf("a year of imported pages by page: %v (%s)\n", time.Since(qs), rd)
		qs = time.Now()
		r.rows("shop", map[string]any{"metrics": []string{"visitors", "visits", "bounce_rate"}, "date_range": []string{"2025-01-01", "2025-12-31"},
			"dimensions": []string{"time:day"}, "include": map[string]any{"imports": true}})
		fmt.Printf("a year of imported days by day: %v\n", time.Since(qs))
	}
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s) - 1) * p / 100
	return s[i].Round(10 * time.Microsecond)
}

// sendEvery sends single events for d, one every gap, and returns their
// latencies.
func sendEvery(r *rig, site string, gap, d time.Duration) []time.Duration {
	stop := make(chan struct{})
	time.AfterFunc(d, func() { close(stop) })
	return sendUntil(r, site, gap, stop)
}

func sendUntil(r *rig, site string, gap time.Duration, stop chan struct{}) []time.Duration {
	var out []time.Duration
	tick := time.NewTicker(gap)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return out
		case <-tick.C:
		}
		ev := map[string]any{"id": uuid.NewString(), "site_id": site, "anon_id": "a", "type": "pageview", "url": "https://shop.test/"}
		s := time.Now()
		status, _ := r.do(r.coll.URL+"/v1/s2s/events", "POST", site, ev)
		if status == 202 {
			out = append(out, time.Since(s))
		}
	}
}

// writeBigExport writes the benchmark's export: a year of 2025.
func writeBigExport(b *testing.B, dir string) []string {
	b.Helper()
	type file struct {
		name, header string
		row          func(day string, i int) string
		per          int
	}
	specs := []file{
		{"imported_visitors", `"date","visitors","pageviews","bounces","visits","visit_duration"`,
			func(d string, i int) string { return fmt.Sprintf(`"%s",5000,15000,2000,6000,360000`, d) }, 1},
		{"imported_sources", `"date","source","referrer","utm_source","utm_medium","utm_campaign","utm_content","utm_term","pageviews","visitors","visits","visit_duration","bounces"`,
			func(d string, i int) string {
				return fmt.Sprintf(`"%s","source%d","ref%d.test/path","","medium%d","campaign%d","","",300,100,120,7200,40`, d, i, i, i%5, i%10)
			}, 50},
		{"imported_pages", `"date","hostname","page","visits","visitors","pageviews","total_scroll_depth","total_scroll_depth_visits"`,
			func(d string, i int) string {
				return fmt.Sprintf(`"%s","shop.test","/blog/post-number-%d",12,10,30,\N,0`, d, i)
			}, 500},
		{"imported_entry_pages", `"date","entry_page","visitors","entrances","visit_duration","bounces","pageviews"`,
			func(d string, i int) string {
				return fmt.Sprintf(`"%s","/blog/post-number-%d",50,60,3600,20,150`, d, i)
			}, 100},
		{"imported_exit_pages", `"date","exit_page","visitors","visit_duration","exits","bounces","pageviews"`,
			func(d string, i int) string {
				return fmt.Sprintf(`"%s","/blog/post-number-%d",50,3600,60,20,150`, d, i)
			}, 100},
		{"imported_locations", `"date","country","region","city","visitors","visits","visit_duration","bounces","pageviews"`,
			func(d string, i int) string {
				return fmt.Sprintf(`"%s","%c%c","",0,100,120,7200,40,300`, d, 'A'+i/26, 'A'+i%26)
			}, 50},
		{"imported_devices", `"date","device","visitors","visits","visit_duration","bounces","pageviews"`,
			func(d string, i int) string {
				return fmt.Sprintf(`"%s","%s",1250,1500,90000,500,3750`, d, []string{"Desktop", "Laptop", "Mobile", "Tablet"}[i])
			}, 4},
		{"imported_browsers", `"date","browser","browser_version","visitors","visits","visit_duration","bounces","pageviews"`,
			func(d string, i int) string {
				return fmt.Sprintf(`"%s","Browser%d","%d.0",250,300,18000,100,750`, d, i%5, i)
			}, 20},
		{"imported_operating_systems", `"date","operating_system","operating_system_version","visitors","visits","visit_duration","bounces","pageviews"`,
			func(d string, i int) string { return fmt.Sprintf(`"%s","OS%d","%d",500,600,36000,200,1500`, d, i%4, i) }, 10},
		{"imported_custom_events", `"date","name","link_url","path","visitors","events"`,
			func(d string, i int) string { return fmt.Sprintf(`"%s","Event %d","","",20,30`, d, i) }, 10},
	}
	var out []string
	for _, s := range specs {
		var sb strings.Builder
		sb.WriteString(s.header + "\n")
		for day := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC); day.Year() == 2025; day = day.AddDate(0, 0, 1) {
			for i := 0; i < s.per; i++ {
				sb.WriteString(s.row(day.Format(time.DateOnly), i) + "\n")
			}
		}
		name := filepath.Join(dir, s.name+"_20250101_20251231.csv")
		if err := os.WriteFile(name, []byte(sb.String()), 0o600); err != nil {
			b.Fatal(err)
		}
		out = append(out, name)
	}
	return out
}

// BenchmarkIncludeImportsOverhead times a small report through the query
// API with and without include.imports on a site without imports (what
// the dashboard now asks on every site): the look-ups of the site's
// imports are the difference.
//
//	go test ./importer -run '^$' -bench IncludeImportsOverhead -benchtime 2000x
func BenchmarkIncludeImportsOverhead(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("imports=%v", on), func(b *testing.B) {
			t := &testing.T{}
			r := newRig(t)
			r.t = t
			r.site("shop")
			r.sendNative("shop")
			body := map[string]any{"metrics": []string{"visitors", "visits"}, "date_range": []string{"2026-01-01", "2026-01-30"},
				"dimensions": []string{"visit:source"}}
			if on {
				body["include"] = map[string]any{"imports": true}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r.rows("shop", body)
			}
		})
	}
}
