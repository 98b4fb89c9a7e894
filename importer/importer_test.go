package importer

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The sample export's rows as read: agent, place, page, referrer and
// source of each, and the ids of the two identical rows apart.
func TestGoatCounterMapping(t *testing.T) {
	var got []Row
	st, err := ReadFiles(context.Background(), "goatcounter", []string{"../testdata/import/goatcounter-v2.csv"}, func(r Row) error {
		got = append(got, r)
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Rows != 8 || st.Skipped != 1 {
		t.Fatalf("got %d rows, %d skipped; want 8 and 1 (the bot)", st.Rows, st.Skipped)
	}
	s := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return *p
	}
	tests := []struct {
		i                                               int
		typ, url, ref, browser, os, device, country, ts string
	}{
		{0, "pageview", "/", "https://news.ycombinator.com/item", "Firefox", "Linux", "desktop", "DE", "2024-03-01T10:00:00Z"},
		{2, "signup-click", "<nil>", "<nil>", "Firefox", "Linux", "desktop", "DE", "2024-03-01T10:06:00Z"},
		{3, "pageview", "/?utm_source=Hacker+News", "<nil>", "Chrome", "Windows", "mobile", "US", "2024-03-01T12:00:00Z"},
		{5, "pageview", "/blog/a", "https://www.google.com/", "Safari", "iOS", "mobile", "FR", "2024-03-02T08:00:00Z"},
	}
	for _, tt := range tests {
		r := got[tt.i]
		g := []string{r.Type, s(r.URL), s(r.Referrer), r.Browser, r.OS, r.DeviceType, r.Country, r.TS}
		w := []string{tt.typ, tt.url, tt.ref, tt.browser, tt.os, tt.device, tt.country, tt.ts}
		if strings.Join(g, " | ") != strings.Join(w, " | ") {
			t.Errorf("row %d: got %q, want %q", tt.i, g, w)
		}
	}
	if got[6].ID == got[7].ID || got[6].AnonID != got[7].AnonID {
		t.Errorf("got ids %s and %s for two identical rows, want two ids of one visitor", got[6].ID, got[7].ID)
	}
	// The same file read again gives the same ids.
	var again []Row
	ReadFiles(context.Background(), "goatcounter", []string{"../testdata/import/goatcounter-v2.csv"}, func(r Row) error {
		again = append(again, r)
		return nil
	}, nil)
	for i := range got {
		if again[i].ID != got[i].ID {
			t.Fatalf("row %d: got id %s on the second read, want %s", i, again[i].ID, got[i].ID)
		}
	}
}

func TestUmamiNames(t *testing.T) {
	tests := []struct{ in, browser, os, device string }{
		{"chrome", "Chrome", "Windows", "desktop"},
		{"ios", "Mobile Safari", "iOS", "mobile"},
		{"edge-chromium", "Edge", "macOS", "tablet"},
		{"crios", "Chrome", "Android", "other"},
		{"brave", "brave", "Linux", ""},
	}
	oses := []string{"Windows 10", "iOS", "Mac OS", "Android OS", "Linux"}
	devices := []string{"laptop", "mobile", "tablet", "smarttv", ""}
	for i, tt := range tests {
		if got := umamiBrowser(tt.in); got != tt.browser {
			t.Errorf("browser %q: got %q, want %q", tt.in, got, tt.browser)
		}
		if got := umamiOS(oses[i]); got != tt.os {
			t.Errorf("os %q: got %q, want %q", oses[i], got, tt.os)
		}
		if got := umamiDevice(devices[i]); got != tt.device {
			t.Errorf("device %q: got %q, want %q", devices[i], got, tt.device)
		}
	}
}

func TestEventType(t *testing.T) {
	tests := []struct {
		name, want string
		exact      bool
	}{
		{"signup", "signup", true},
		{"Sign up now!", "Sign_up_now_", false},
		{"café", "caf_", false},
		{strings.Repeat("x", 70), strings.Repeat("x", 64), false},
		{"", "event", false},
	}
	for _, tt := range tests {
		if got, exact := eventType(tt.name); got != tt.want || exact != tt.exact {
			t.Errorf("%q: got %q %v, want %q %v", tt.name, got, exact, tt.want, tt.exact)
		}
	}
}

// A name that is not a type keeps the original in properties.name.
func TestUmamiEventNameKept(t *testing.T) {
	cols := map[string]string{"event_id": "e1", "session_id": "s1", "created_at": "2024-03-15 10:00:00.123", "url_path": "/x",
		"event_type": "2", "event_name": "Sign up now!", "hostname": "example.com", "url_query": "?a=1"}
	row, ok, err := umamiRow(func(c string) string { return cols[c] }, map[string]any{"plan": "pro"})
	if err != nil || !ok {
		t.Fatalf("got %v %v", ok, err)
	}
	var props map[string]any
	json.Unmarshal(row.Properties, &props)
	if row.Type != "Sign_up_now_" || props["name"] != "Sign up now!" || props["plan"] != "pro" || *row.URL != "https://example.com/x?a=1" || row.TS != "2024-03-15T10:00:00.123Z" {
		t.Errorf("got %+v %v", row, props)
	}
}

func TestProgressLines(t *testing.T) {
	for _, terminal := range []bool{false, true} {
		var b strings.Builder
		p := NewProgress(&b, 100, 2<<20)
		p.terminal = terminal
		clock := p.start
		p.now = func() time.Time { return clock }
		clock = clock.Add(10 * time.Second)
		p.Bytes(1 << 20)
		p.Rows(50)
		p.Rows(60) // within the interval: not printed
		p.Done()
		want := "50/100 rows, 1.0/2.0 MiB, 5 rows/s\n60/100 rows, 1.0/2.0 MiB, 6 rows/s\n"
		if terminal {
			want = "\r\x1b[K50/100 rows, 1.0/2.0 MiB, 5 rows/s\r\x1b[K60/100 rows, 1.0/2.0 MiB, 6 rows/s\n"
		}
		if b.String() != want {
			t.Errorf("terminal %v: got %q, want %q", terminal, b.String(), want)
		}
	}
}
