package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tally-analytics/tally/internal/chromiumtest"
	"github.com/tally-analytics/tally/server/servertest"
)

// snippetDomain is the site's name in the products' published snippets.
const snippetDomain = "yourdomain.com"

// snippetWorld is a collector, a site called snippetDomain, and a browser
// in which the products' published hosts lead to Tally: plausible.io and
// cloud.umami.is (HTTPS, through a TLS proxy to the collector) and
// yourdomain.com (the test's pages), so that a page holds a published
// snippet verbatim.
type snippetWorld struct {
	t     *testing.T
	srv   *servertest.Server
	ctx   context.Context
	pages *httptest.Server
}

// newSnippetWorld serves pages (path to HTML) on http://yourdomain.com
// (and on 127.0.0.1, w.pages.URL) and gives the site the aliases
// (snippetDomain and more).
func newSnippetWorld(t *testing.T, pages map[string]string, aliases ...string) *snippetWorld {
	t.Helper()
	srv := servertest.New(t)
	collector, _ := url.Parse(srv.CollectorURL)
	proxy := httptest.NewTLSServer(httputil.NewSingleHostReverseProxy(collector))
	t.Cleanup(proxy.Close)
	// /stats/ on the site's own host leads to the collector, as Plausible's
	// proxy guides set it up.
	stats := http.StripPrefix("/stats", httputil.NewSingleHostReverseProxy(collector))
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/stats/") {
			stats.ServeHTTP(w, r)
			return
		}
		html, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(html))
	}))
	t.Cleanup(site.Close)
	host := func(s *httptest.Server) string { u, _ := url.Parse(s.URL); return u.Host }
	ctx := chromiumtest.Browser(t,
		chromedp.Flag("host-resolver-rules", fmt.Sprintf("MAP plausible.io %s,MAP cloud.umami.is %s,MAP %s %s", host(proxy), host(proxy), snippetDomain, host(site))),
		chromedp.Flag("ignore-certificate-errors", true),
		// Plausible's script sends nothing from a browser that says it is
		// driven (navigator.webdriver).
		chromedp.Flag("disable-blink-features", "AutomationControlled"),
		chromedp.Flag("disable-features", "HttpsUpgrades"),
	)
	w := &snippetWorld{t: t, srv: srv, ctx: ctx, pages: site}
	var out struct {
		Aliases []string `json:"aliases"`
	}
	w.call(http.MethodPatch, "/v1/sites/"+srv.SiteID, map[string]any{"aliases": append([]string{snippetDomain}, aliases...)}, &out)
	if len(out.Aliases) != 1+len(aliases) {
		t.Fatalf("got aliases %v", out.Aliases)
	}
	return w
}

// open loads http://yourdomain.com + path; again when the load was
// aborted by the navigation a clicked link had started.
func (w *snippetWorld) open(path string) {
	w.t.Helper()
	// A page's script may still be following a clicked link (an outbound
	// one, after its event was sent): leave it for a blank page first, so
	// that navigation cannot abort this one, and never load the page
	// twice (a retry after a reported abort loaded it again, and counted
	// a second pageview, when the first load had in fact gone through).
	var err error
	for range 3 {
		if err = chromedp.Do(w.ctx, chromedp.Navigate("about:blank")); err == nil || !strings.Contains(err.Error(), "ERR_ABORTED") {
			break
		}
	}
	url := "http://" + snippetDomain + path
	for range 3 {
		if err = chromedp.Do(w.ctx, chromedp.Navigate(url)); err == nil || !strings.Contains(err.Error(), "ERR_ABORTED") {
			break
		}
		if got, e := chromedp.Run(w.ctx, chromedp.Evaluate[string](`location.href`)); e == nil && got == url {
			err = nil
			break
		}
	}
	if err != nil {
		w.t.Fatalf("%s: %v", path, err)
	}
}

// waitPath waits until the browser shows the page path (a clicked link's);
// evaluations fail while the page is being replaced.
func (w *snippetWorld) waitPath(path string) {
	w.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := chromedp.Run(w.ctx, chromedp.Evaluate[string](`location.pathname`))
		if err == nil && got == path {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("waiting for %s: at %q (%v)", path, got, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// run evaluates js in the page.
func (w *snippetWorld) run(js string) {
	w.t.Helper()
	if _, err := chromedp.Run(w.ctx, chromedp.Evaluate[any](js+`; null`)); err != nil {
		w.t.Fatalf("%s: %v", js, err)
	}
}

// wait waits until n events are stored and returns them.
func (w *snippetWorld) wait(n int) []servertest.Event {
	w.t.Helper()
	return w.srv.MustWaitEvents(w.t, n, 20*time.Second)
}

// call makes a query API request with the admin token.
func (w *snippetWorld) call(method, path string, body, out any) {
	w.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, w.srv.QueryURL+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+w.srv.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer res.Body.Close()
	var raw bytes.Buffer
	raw.ReadFrom(res.Body)
	if res.StatusCode >= 300 {
		w.t.Fatalf("%s %s: got %d %s", method, path, res.StatusCode, raw.Bytes())
	}
	if out != nil {
		if err := json.Unmarshal(raw.Bytes(), out); err != nil {
			w.t.Fatalf("%s %s: %v in %s", method, path, err, raw.Bytes())
		}
	}
}

// query runs a Plausible v2 query (POST /api/v2/query, the site's id,
// all time) and gives each row as its dimensions joined
// by "|" and its metrics as JSON.
func (w *snippetWorld) query(metrics []string, dims []string, filters ...any) map[string]string {
	w.t.Helper()
	body := map[string]any{"site_id": w.srv.SiteID, "metrics": metrics, "date_range": "all"}
	if dims != nil {
		body["dimensions"] = dims
	}
	if filters != nil {
		body["filters"] = filters
	}
	var res struct {
		Results []struct {
			Dimensions []any             `json:"dimensions"`
			Metrics    []json.RawMessage `json:"metrics"`
		} `json:"results"`
	}
	w.call(http.MethodPost, "/api/v2/query", body, &res)
	out := map[string]string{}
	for _, r := range res.Results {
		var d []string
		for _, v := range r.Dimensions {
			d = append(d, fmt.Sprint(v))
		}
		m, _ := json.Marshal(r.Metrics)
		out[strings.Join(d, "|")] = string(m)
	}
	return out
}

// check compares a query's rows with want.
func (w *snippetWorld) check(what string, got, want map[string]string) {
	w.t.Helper()
	g, _ := json.Marshal(got)
	x, _ := json.Marshal(want)
	if string(g) != string(x) {
		w.t.Errorf("%s: got %s, want %s", what, g, x)
	}
}
