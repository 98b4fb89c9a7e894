package storage

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// visitSource is a visit's source as docs/intake.md#visits states it: its
// utm_source, else its referrer's host (the referrer up to its path), else
// "" (Direct / None). The generated column source computes it in SQL
// (migration 0016); TestSourceIsDerived holds the two together.
func visitSource(utmSource, referrer string) string {
	if utmSource != "" {
		return utmSource
	}
	host := referrer
	prefix := ""
	if strings.HasPrefix(host, "android-app://") {
		prefix, host = "android-app://", host[len("android-app://"):]
	}
	if i := strings.IndexByte(host, '/'); i >= 0 {
		host = host[:i]
	}
	if host == "" {
		return ""
	}
	return prefix + host
}

// TestSourceIsDerived: the generated source is visitSource of the row's
// utm_source and referrer.
func TestSourceIsDerived(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	cases := [][2]string{
		{"", ""}, {"newsletter", ""}, {"newsletter", "news.test/a"}, {"", "news.test"}, {"", "news.test/a/b"},
		{"", "android-app://com.example.app"}, {"", "android-app://com.example.app/x"}, {"", "android-app://"},
		{"", "xn--bcher-kva.test/p"}, {"", "news.test:8080/a"}, {"", "/a"},
	}
	for i, c := range cases {
		execInWriter(t, db, fmt.Sprintf(`INSERT INTO sessions(site_id, anon_id, start_text, end_text, start_ms, duration_ms, event_count, utm_source, referrer)
			VALUES ('s', 'v%d', '', '', 0, 0, 1, nullif('%s', ''), nullif('%s', ''))`, i, c[0], c[1]))
	}
	for i, c := range cases {
		var got *string
		if err := db.read.QueryRow(`SELECT source FROM sessions WHERE anon_id = ?`, fmt.Sprintf("v%d", i)).Scan(&got); err != nil {
			t.Fatal(err)
		}
		want := visitSource(c[0], c[1])
		if (got == nil) != (want == "") || got != nil && *got != want {
			t.Errorf("utm_source %q, referrer %q: got source %v, want %q", c[0], c[1], deref(got), want)
		}
	}
}

// TestAgentCodes: every code of the lists reads back, through migration
// 0016's generated columns, as its list's value; agentCodeSQL (the
// conversion's) codes text as agentCode does; a value off the lists is
// kept as text.
func TestAgentCodes(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	n := 0
	for b := range agentBrowsers {
		for o := range agentOSes {
			for d := range agentDevices {
				code, ok := agentCode(agentBrowsers[b], agentOSes[o], agentDevices[d])
				if !ok || code != int64(b+32*o+512*d) {
					t.Fatalf("agentCode(%q, %q, %q): got %d %v, want %d", agentBrowsers[b], agentOSes[o], agentDevices[d], code, ok, b+32*o+512*d)
				}
				var got [3]*string
				var sqlCode *int64
				// Typed: PostgreSQL infers no type for a bare parameter.
				err := db.read.QueryRow(`SELECT `+agentCodeSQL("CAST(?1 AS TEXT)", "CAST(?2 AS TEXT)", "CAST(?3 AS TEXT)"),
					nullable(agentBrowsers[b]), nullable(agentOSes[o]), nullable(agentDevices[d])).Scan(&sqlCode)
				if err != nil || sqlCode == nil || *sqlCode != code {
					t.Fatalf("agentCodeSQL of %d: got %v (%v), want %d", code, sqlCode, err, code)
				}
				n++
				execInWriter(t, db, fmt.Sprintf(`INSERT INTO sessions(site_id, anon_id, start_text, end_text, start_ms, duration_ms, event_count, agent)
					VALUES ('s', 'a%d', '', '', 0, 0, 1, %d)`, code, code))
				if err := db.read.QueryRow(`SELECT browser, os, device FROM sessions WHERE anon_id = ?`, fmt.Sprintf("a%d", code)).Scan(&got[0], &got[1], &got[2]); err != nil {
					t.Fatal(err)
				}
				if deref(got[0]) != agentBrowsers[b] || deref(got[1]) != agentOSes[o] || deref(got[2]) != agentDevices[d] ||
					(got[0] == nil) != (b == 0) || (got[1] == nil) != (o == 0) || (got[2] == nil) != (d == 0) {
					t.Fatalf("agent %d: got %q %q %q, want %q %q %q", code, deref(got[0]), deref(got[1]), deref(got[2]), agentBrowsers[b], agentOSes[o], agentDevices[d])
				}
			}
		}
	}
	if _, ok := agentCode("Lynx", "Windows", "desktop"); ok {
		t.Fatal("agentCode of a browser off the list: got ok, want text")
	}
	var sqlCode *int64
	if err := db.read.QueryRow(`SELECT ` + agentCodeSQL("'Lynx'", "'Windows'", "'desktop'")).Scan(&sqlCode); err != nil || sqlCode != nil {
		t.Fatalf("agentCodeSQL of a browser off the list: got %v (%v), want NULL", sqlCode, err)
	}
}

// TestVisitRowForm: intake stores no source and codes an agent on the
// lists, and keeps one off them as text; both read as sent.
func TestVisitRowForm(t *testing.T) {
	t.Parallel()
	db := openTest(t, filepath.Join(t.TempDir(), "a.db"))
	withSites(t, db, "s")
	a := ev("a", "coded", "pageview", 0, "https://s.test/?utm_source=mail", "https://news.test/x")
	a.Browser, a.OS, a.DeviceType = "Chrome", "Windows", "desktop"
	b := ev("b", "text", "pageview", 0, "https://s.test/", "https://news.test/x")
	b.Browser, b.OS, b.DeviceType = "Lynx", "Linux", "desktop"
	ingestAll(t, db, a, b)
	for _, c := range []struct{ anon, want string }{
		{"coded", "<nil> <nil> <nil> <nil> 545 mail Chrome Windows desktop"},
		{"text", "<nil> Lynx Linux desktop <nil> news.test Lynx Linux desktop"},
	} {
		var vals [9]any
		dests := make([]any, len(vals))
		for i := range vals {
			dests[i] = &vals[i]
		}
		if err := db.read.QueryRow(`SELECT source_text, browser_text, os_text, device_text, agent, source, browser, os, device
			FROM sessions WHERE anon_id = ?`, c.anon).Scan(dests...); err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSuffix(strings.TrimPrefix(fmt.Sprint(vals), "["), "]"); got != c.want {
			t.Errorf("%s: got %s, want %s", c.anon, got, c.want)
		}
	}
}
