package chromiumtest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"
)

func TestMain(m *testing.M) { Main(m) }

// TestTestsShareTheBrowserNotItsState: two contexts of Browser run in one
// chromium, and what a page stores in one (cookie, localStorage) the same
// page does not find in the other.
func TestTestsShareTheBrowserNotItsState(t *testing.T) {
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>t</title>`)
	}))
	defer page.Close()
	a, b := Browser(t), Browser(t)
	const stored = `String(localStorage.getItem("k")) + " " + document.cookie`
	for _, step := range []struct {
		name     string
		ctx      context.Context
		js, want string
	}{
		{"first", a, `localStorage.setItem("k", "v"); document.cookie = "c=1"; ` + stored, "v c=1"},
		{"second", b, stored, "null "},
	} {
		if err := chromedp.Do(step.ctx, chromedp.Navigate(page.URL)); err != nil {
			t.Fatal(err)
		}
		got, err := chromedp.Run(step.ctx, chromedp.Evaluate[string](step.js))
		if err != nil || got != step.want {
			t.Errorf("%s context: got %q (%v), want %q", step.name, got, err, step.want)
		}
	}
	if chromedp.FromContext(a).Browser != chromedp.FromContext(b).Browser {
		t.Error("got two browsers, want one shared")
	}
}
