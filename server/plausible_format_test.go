package server

import (
	"testing"
	"time"
)

// With h (or hashMode) set, the URL's fragment is part of the page, kept
// escaped in the stored URL, as Plausible's hash scripts count pages;
// without it the fragment is no part of the page
// (docs/intake.md#plausibles-snippet).
func TestPlausibleHashRouting(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ body, url string }{
		{`{"n":"pageview","u":"https://a.test/app?x=1#/pricing","d":"a.test","h":1}`, "https://a.test/app%23/pricing?x=1"},
		{`{"n":"pageview","u":"https://a.test/app#/pricing","d":"a.test","hashMode":true}`, "https://a.test/app%23/pricing"},
		{`{"n":"pageview","u":"https://a.test/app#/pricing","d":"a.test"}`, "https://a.test/app#/pricing"},
		{`{"n":"pageview","u":"https://a.test/app","d":"a.test","h":1}`, "https://a.test/app"},
		{`{"n":"pageview","u":"https://a.test/app#x","d":"a.test","h":0}`, "https://a.test/app#x"},
	} {
		evs, _, err := parsePlausible([]byte(tt.body), time.Now())
		if err != nil || len(evs) != 1 || *evs[0].URL != tt.url {
			t.Errorf("%s: got %v %v, want url %s", tt.body, evs, err, tt.url)
		}
	}
}
