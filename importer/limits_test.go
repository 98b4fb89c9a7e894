package importer_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tally-analytics/tally/importer"
	"github.com/tally-analytics/tally/internal/bombtest"
)

// bombField is the size of the one field the bombs below inflate to,
// from a zip or gzip file of about 250 KB.
const bombField = 256 << 20

// maxAllocated bounds what reading a bomb may allocate: the record bound
// (2 MiB) a few times over, with the decompressor's buffers.
const maxAllocated = 64 << 20

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// TestPlausibleImportBoundsMemory imports a Plausible export whose
// visitors file inflates to one 256 MiB field (issue 29: 611 KB drove the
// server to 5.7 GB): the import stops at the record bound with a short
// message, and allocates a small part of the field meanwhile.
func TestPlausibleImportBoundsMemory(t *testing.T) {
	r := newRig(t)
	r.site("shop")
	zipped := filepath.Join(t.TempDir(), "export.zip")
	bombtest.Zip(t, zipped, "imported_visitors_20260101_20260103.csv",
		"date,visitors,pageviews,bounces,visits,visit_duration\n2026-01-01,", '9', bombField, ",1,1,1,1\n")
	var err error
	mem := bombtest.Measure(func() {
		_, err = importer.Plausible(context.Background(), r.db, "shop", []string{zipped}, nil)
	})
	t.Logf("a %d MiB field: %.1f MiB allocated, heap grew by %.1f MiB at most; %.300v", bombField>>20,
		mib(mem.Allocated), mib(mem.PeakHeap), err)
	if err == nil || !strings.Contains(err.Error(), "line 2: a record longer than 2 MiB") || len(err.Error()) > 1100 {
		t.Errorf("got error %.2000v (%d bytes), want line 2 named in under 1100 bytes", err, len(errString(err)))
	}
	if mem.Allocated > maxAllocated {
		t.Errorf("allocated %.0f MiB, want at most %d", mib(mem.Allocated), maxAllocated>>20)
	}
	if n := r.count(`SELECT COUNT(*) FROM imported_rows`); n != 0 {
		t.Errorf("got %d imported rows, want none", n)
	}
}

// TestPlausibleImportBounds refuses, before writing anything, an export
// whose files together are over the total, and a zip listing more files
// than an export's directory can hold; a long value is quoted clipped.
func TestPlausibleImportBounds(t *testing.T) {
	r := newRig(t)
	r.site("shop")
	dir := t.TempDir()
	t.Run("over the total", func(t *testing.T) {
		defer importer.SetTotals(1<<30, 100)()
		_, err := importer.Plausible(context.Background(), r.db, "shop", []string{sampleZip(t)}, nil)
		if err == nil || !strings.Contains(err.Error(), "the export's CSV files hold more than 100 bytes once decompressed") {
			t.Errorf("got %v, want the total named", err)
		}
	})
	t.Run("a directory of many entries", func(t *testing.T) {
		name := filepath.Join(dir, "many.zip")
		bombtest.ZipEntries(t, name, 20000)
		_, err := importer.Plausible(context.Background(), r.db, "shop", []string{name}, nil)
		if err == nil || !strings.Contains(err.Error(), "a zip whose list of files is over 1 MiB") {
			t.Errorf("got %v, want the directory refused", err)
		}
	})
	t.Run("a long value", func(t *testing.T) {
		name := filepath.Join(dir, "imported_visitors_20260101_20260103.csv")
		writeFile(t, name, "date,visitors,pageviews,bounces,visits,visit_duration\n2026-01-01,"+strings.Repeat("x", 1<<20)+",1,1,1,1\n")
		_, err := importer.Plausible(context.Background(), r.db, "shop", []string{name}, nil)
		if err == nil || !strings.Contains(err.Error(), `line 2: column "visitors": "xxxx`) || !strings.Contains(err.Error(), `…" (1048576 bytes) is not a whole number`) || len(err.Error()) > 1100 {
			t.Errorf("got %.2000v, want the value clipped", err)
		}
	})
	if n := r.count(`SELECT COUNT(*) FROM imports`); n != 0 {
		t.Errorf("got %d imports, want none", n)
	}
}

// The row sources' files (gzipped, as GoatCounter exports) stop at the
// record or line bound, naming the file and line, in a bounded memory.
func TestReadFilesBoundsMemory(t *testing.T) {
	goat := "2Path,Title,Event,UserAgent,Browser,System,Session,Bot,Referrer,Referrer scheme,Screen size,Location,FirstVisit,Date\n"
	tally := "id,type,url,ts,anon_id,referrer,country,city,browser,os,device_type,user_id,properties,received_at\n"
	for _, c := range []struct {
		name, source, head string
		fill               byte
		tail, want         string
	}{
		{"goatcounter, a long date", "goatcounter", goat + "/a,,false,,,,s1,0,,,,,false,2026-01-01T00:00:00Z\n/b,,false,,,,s1,0,,,,,false,", '9', "\n",
			":3: a record longer than 2 MiB"},
		{"goatcounter, a quoted field of many lines", "goatcounter", goat + `"`, '\n', `",,false,,,,s1,0,,,,,false,2026-01-01T00:00:00Z` + "\n",
			":2: a record longer than 2 MiB"},
		{"umami", "umami", "event_id,session_id,created_at,url_path,event_type\ne1,s1,", '9', ",/,1\n", ":2: a record longer than 2 MiB"},
		{"tally csv", "tally", tally + "e1,pageview,", 'x', ",2026-01-01T00:00:00Z,a,,,,,,,,,\n", ":2: a record longer than 2 MiB"},
		{"tally ndjson", "tally", `{"id":"e1","type":"pageview","url":"`, 'x', `"}` + "\n", ":1: longer than 1 MiB"},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := filepath.Join(t.TempDir(), "export.csv.gz")
			bombtest.Gzip(t, name, c.head, c.fill, bombField, c.tail)
			var err error
			mem := bombtest.Measure(func() {
				_, err = importer.ReadFiles(context.Background(), c.source, []string{name}, func(importer.Row) error { return nil }, nil)
			})
			t.Logf("%.1f MiB allocated, heap grew by %.1f MiB at most; %.300v", mib(mem.Allocated), mib(mem.PeakHeap), err)
			var le *importer.LineError
			if !errors.As(err, &le) || !strings.Contains(err.Error(), name+c.want) || len(err.Error()) > 1100 {
				t.Errorf("got %.2000v, want %s%s", err, name, c.want)
			}
			if mem.Allocated > maxAllocated {
				t.Errorf("allocated %.0f MiB, want at most %d", mib(mem.Allocated), maxAllocated>>20)
			}
		})
	}
}

// The files of one import are read up to a total, and a long value is
// quoted clipped.
func TestReadFilesBounds(t *testing.T) {
	dir := t.TempDir()
	goat := "2Path,Title,Event,UserAgent,Browser,System,Session,Bot,Referrer,Referrer scheme,Screen size,Location,FirstVisit,Date\n"
	row := "/a,,false,,,,s1,0,,,,,false,2026-01-01T00:00:00Z\n"
	a, b := filepath.Join(dir, "a.csv"), filepath.Join(dir, "b.csv")
	writeFile(t, a, goat+strings.Repeat(row, 40))
	writeFile(t, b, goat+strings.Repeat(row, 40))
	read := func(files ...string) error {
		_, err := importer.ReadFiles(context.Background(), "goatcounter", files, func(importer.Row) error { return nil }, nil)
		return err
	}
	func() {
		st, _ := os.Stat(a)
		defer importer.SetTotals(st.Size()+10, 1<<30)()
		if err := read(a); err != nil {
			t.Errorf("one file within the total: got %v", err)
		}
		if err := read(a, b); err == nil || !strings.Contains(err.Error(), b+": the files hold more than ") {
			t.Errorf("two files over the total: got %v, want the second named", err)
		}
	}()
	long := filepath.Join(dir, "long.csv")
	writeFile(t, long, goat+"/a,,false,,,,s1,0,,,,,false,"+strings.Repeat("y", 1<<20)+"\n")
	if err := read(long); err == nil || !strings.Contains(err.Error(), `long.csv:2: Date: want an RFC 3339 time, got "yyyy`) ||
		!strings.Contains(err.Error(), `…" (1048576 bytes)`) || len(err.Error()) > 1100 {
		t.Errorf("got %.2000v, want the value clipped", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
