// Package bombtest makes decompression bombs for the tests of the
// importers' bounds (docs/import.md#switching-from-plausible--umami--goatcounter,
// Bounds): files of a few hundred KB that inflate to one
// huge CSV field, and a measure of the memory a call takes meanwhile.
package bombtest

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"
)

// write writes head, n bytes of fill, then tail to w.
func write(w io.Writer, head string, fill byte, n int64, tail string) error {
	if _, err := io.WriteString(w, head); err != nil {
		return err
	}
	chunk := bytes.Repeat([]byte{fill}, 1<<20)
	for n > 0 {
		c := chunk
		if n < int64(len(c)) {
			c = c[:n]
		}
		if _, err := w.Write(c); err != nil {
			return err
		}
		n -= int64(len(c))
	}
	_, err := io.WriteString(w, tail)
	return err
}

// create writes the file at path with fill, failing t on any error.
func create(t testing.TB, path string, fill func(io.Writer) error) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	err = fill(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// Zip writes a zip at path whose one entry, deflated, holds head, n bytes
// of fill and tail.
func Zip(t testing.TB, path, entry, head string, fill byte, n int64, tail string) {
	t.Helper()
	create(t, path, func(f io.Writer) error {
		z := zip.NewWriter(f)
		z.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) {
			return flate.NewWriter(w, flate.BestSpeed)
		})
		w, err := z.CreateHeader(&zip.FileHeader{Name: entry, Method: zip.Deflate})
		if err == nil {
			err = write(w, head, fill, n, tail)
		}
		if err != nil {
			return err
		}
		return z.Close()
	})
}

// Gzip writes a gzip file at path holding head, n bytes of fill and tail.
func Gzip(t testing.TB, path, head string, fill byte, n int64, tail string) {
	t.Helper()
	create(t, path, func(f io.Writer) error {
		z, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
		if err := write(z, head, fill, n, tail); err != nil {
			return err
		}
		return z.Close()
	})
}

// ZipEntries writes a zip at path of n empty entries: a long directory.
func ZipEntries(t testing.TB, path string, n int) {
	t.Helper()
	create(t, path, func(f io.Writer) error {
		z := zip.NewWriter(f)
		for i := 0; i < n; i++ {
			if _, err := z.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("__MACOSX/._%08d", i), Method: zip.Store}); err != nil {
				return err
			}
		}
		return z.Close()
	})
}

// Memory is what a call took: the bytes the whole process allocated while
// it ran (runtime.MemStats.TotalAlloc, so an upper bound on how much the
// heap can have grown) and the largest growth of the heap in use over its
// size before, seen by sampling every 5 ms.
type Memory struct {
	Allocated, PeakHeap uint64
}

// Measure runs f and returns the memory it took.
func Measure(f func()) Memory {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var (
		mu   sync.Mutex
		peak uint64
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	sample := func() {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		mu.Lock()
		peak = max(peak, m.HeapInuse)
		mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				sample()
			}
		}
	}()
	f()
	close(done)
	wg.Wait()
	sample()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	return Memory{Allocated: after.TotalAlloc - before.TotalAlloc, PeakHeap: peak - min(peak, before.HeapInuse)}
}
