package web

import (
	"bytes"
	"compress/gzip"
	"io/fs"
	"testing"
)

func TestScriptSizeBudget(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(Script())
	zw.Close()
	if buf.Len() > 2048 {
		t.Fatalf("the tracking script is %d bytes gzipped, over the 2 KB budget", buf.Len())
	}
	t.Logf("script: %d bytes, %d gzipped", len(Script()), buf.Len())
}

func TestDashboardFiles(t *testing.T) {
	for _, name := range []string{"index.html", "app.js", "style.css"} {
		if b, err := fs.ReadFile(Dashboard(), name); err != nil || len(b) == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Plausible's legacy script with every extension on stays under the
// tracking script's budget.
func TestPlausibleScriptSizeBudget(t *testing.T) {
	b, _ := PlausibleScript(PlausibleExtensions)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	if buf.Len() > 2048 {
		t.Fatalf("the Plausible script is %d bytes gzipped, over the 2 KB budget", buf.Len())
	}
	t.Logf("plausible script: %d bytes, %d gzipped", len(b), buf.Len())
}
