package privacy

import "testing"

func TestSourceName(t *testing.T) {
	for _, c := range []struct {
		host, want string
		ok         bool
	}{
		{"google.com", "Google", true},
		{"www.google.co.uk", "Google", true},
		{"WWW.Google.DE:443", "Google", true},
		{"news.ycombinator.com", "Hacker News", true},
		{"t.co", "X (Twitter)", true},
		{"x.com", "X (Twitter)", true},
		{"l.facebook.com", "Facebook", true},
		{"en.m.wikipedia.org", "Wikipedia", true},
		{"notwikipedia.org", "", false},
		{"gemini.google.com", "Google Gemini", true},
		{"chatgpt.com", "ChatGPT", true},
		{"go.bsky.app", "Bluesky", true},
		{"duckduckgo.com", "DuckDuckGo", true},
		{"bing.com", "Bing", true},
		{"com.google.android.googlequicksearchbox", "Google", true},
		// Matomo lists cnn.com for its Google-powered search: by host alone
		// it is a referral.
		{"cnn.com", "", false},
		{"markosaric.com", "", false},
		// Reserved top-level domains match no "google.{}".
		{"google.test", "", false},
		{"www.bing.example", "", false},
		{"", "", false},
		{"co.uk", "", false},
	} {
		got, ok := SourceName(c.host)
		if got != c.want || ok != c.ok {
			t.Errorf("SourceName(%q): got %q, %v, want %q, %v", c.host, got, ok, c.want, c.ok)
		}
	}
}

func TestUTMSourceName(t *testing.T) {
	for _, c := range []struct {
		v, want string
		ok      bool
	}{
		{"google", "Google", true},
		{"GOOGLE", "Google", true},
		{"ig", "Instagram", true},
		{"fb-ads", "Facebook", true},
		{"twitter", "X (Twitter)", true},
		{"newsletter", "", false},
	} {
		got, ok := UTMSourceName(c.v)
		if got != c.want || ok != c.ok {
			t.Errorf("UTMSourceName(%q): got %q, %v, want %q, %v", c.v, got, ok, c.want, c.ok)
		}
	}
	if k := SourceKind("Google"); k != SourceSearch {
		t.Errorf("SourceKind(Google): got %q, want %q", k, SourceSearch)
	}
	if k := SourceKind("Youtube"); k != SourceVideo {
		t.Errorf("SourceKind(Youtube): got %q, want %q", k, SourceVideo)
	}
}
