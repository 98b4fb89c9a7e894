package privacy

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseAgent(t *testing.T) {
	tests := []struct {
		ua                  string
		bot                 bool
		browser, os, device string
	}{
		{"", false, "", "", ""},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/118.0.0.0 Safari/537.36", false, "Chrome", "Windows", "desktop"},
		{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Safari/605.1.15", false, "Safari", "macOS", "desktop"},
		{"Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0", false, "Firefox", "Linux", "desktop"},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1", false, "Mobile Safari", "iOS", "mobile"},
		{"Mozilla/5.0 (iPad; CPU OS 16_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.0 Mobile/15E148 Safari/604.1", false, "Safari", "iOS", "tablet"},
		{"Mozilla/5.0 (Linux; Android 13; Pixel 7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/116.0.0.0 Mobile Safari/537.36", false, "Chrome", "Android", "mobile"},
		{"some unknown thing", false, "", "", "other"},
		{"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", true, "", "", ""},
		{"Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", true, "", "", ""},
		{"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/120.0.0.0 Safari/537.36", true, "", "", ""},
		{"Mozilla/5.0 (compatible; YandexSpider/3.0)", true, "", "", ""},
		{"Screaming Frog SEO Spider/19.0", true, "", "", ""},
		{"ia_archiver", true, "", "", ""},
		{"Mozilla/5.0 (Unknown; Linux x86_64) AppleWebKit/538.1 (KHTML, like Gecko) PhantomJS/2.1.1 Safari/538.1", true, "", "", ""},
		{"facebookexternalhit/1.1", true, "", "", ""},
		{"curl/8.4.0", false, "", "", "other"},
		{"Go-http-client/1.1", false, "", "", "other"},
		{"python-requests/2.31.0", false, "", "", "other"},
		{"curl-crawler/1.0 (bot)", true, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.ua, func(t *testing.T) {
			a := ParseAgent(tt.ua)
			if a.Bot != tt.bot {
				t.Fatalf("got bot %v, want %v", a.Bot, tt.bot)
			}
			if tt.bot {
				return
			}
			if a.Browser != tt.browser || a.OS != tt.os || a.DeviceType != tt.device {
				t.Fatalf("got %q/%q/%q, want %q/%q/%q", a.Browser, a.OS, a.DeviceType, tt.browser, tt.os, tt.device)
			}
		})
	}
}

// The memo answers as the parser does, however often a string repeats, and
// never holds more than agentCacheSize strings.
func TestParseAgentMemo(t *testing.T) {
	uas := []string{"", "curl/8.4.0", "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1",
		"Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0 " + strings.Repeat("x", agentCacheMaxLen)}
	for range 3 {
		for _, ua := range uas {
			if got, want := ParseAgent(ua), parseAgent(ua); got != want {
				t.Fatalf("ParseAgent(%.40q) = %+v, want %+v", ua, got, want)
			}
		}
	}
	for i := range 2*agentCacheSize + 10 {
		ParseAgent(fmt.Sprintf("agent-%d", i))
		agentMemo.Lock()
		n := len(agentMemo.m)
		agentMemo.Unlock()
		if n > agentCacheSize {
			t.Fatalf("got %d memoized agents, want at most %d", n, agentCacheSize)
		}
	}
}

func BenchmarkParseAgent(b *testing.B) {
	ua := "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/118.0.0.0 Safari/537.36"
	b.Run("parse", func(b *testing.B) {
		for b.Loop() {
			parseAgent(ua)
		}
	})
	b.Run("memo", func(b *testing.B) {
		for b.Loop() {
			ParseAgent(ua)
		}
	})
}

// Versions as Plausible shows them: the browser's major.minor, the OS's
// release.
func TestAgentVersions(t *testing.T) {
	for _, c := range []struct{ ua, browser, os string }{
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.6099.129 Safari/537.36", "120.0", "10"},
		{"Mozilla/5.0 (Windows NT 6.1; Win64; x64; rv:115.0) Gecko/20100101 Firefox/115.0", "115.0", "7"},
		{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1.15", "17.1", "10.15"},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1", "17.1", "17.1"},
		{"Mozilla/5.0 (iPad; CPU OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.6 Mobile/15E148 Safari/604.1", "16.6", "16.6"},
		{"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36", "120.0", "14"},
		{"Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0", "121.0", ""},
		{"curl/8.5.0", "", ""},
		{"", "", ""},
	} {
		a := ParseAgent(c.ua)
		if a.BrowserVersion != c.browser || a.OSVersion != c.os {
			t.Errorf("ParseAgent(%q): got versions %q, %q, want %q, %q", c.ua, a.BrowserVersion, a.OSVersion, c.browser, c.os)
		}
	}
}
