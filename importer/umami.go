package importer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Umami's events: rows of its website_event table with the session's
// columns beside them, in a CSV under Umami's column names (a header
// naming them, in any order: website_id, session_id, visit_id, event_id,
// hostname, browser, os, device, screen, language, country, region, city,
// url_path, url_query, utm_*, referrer_path, referrer_query,
// referrer_domain, page_title, ..., event_type, event_name, tag,
// distinct_id, created_at) and as umami_sql.go reads them from its
// PostgreSQL or MySQL database. The columns are those of Umami's schema:
// website_event and session in prisma/migrations/01_init/migration.sql of
// github.com/umami-software/umami, visit_id added by 05_add_visit_id,
// distinct_id by 10_add_distinct_id. Only the columns below are read;
// event_type 1 is a pageview, 2 a custom event, any other (links, pixels
// of later releases) is skipped.

// umamiRequired are the columns an Umami CSV must have.
var umamiRequired = []string{"event_id", "session_id", "created_at", "url_path", "event_type"}

func readUmamiCSV(r io.Reader, ids *ContentIDs, emit func(Row) error, skip func()) error {
	t, _, err := newCSVTable(r)
	if err != nil {
		return err
	}
	for _, c := range umamiRequired {
		if !t.has(c) {
			return lineErr(1, "not an Umami CSV export: no column %q (want %s)", c, strings.Join(umamiRequired, ", "))
		}
	}
	for {
		err := t.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		row, ok, err := umamiRow(t.get, nil)
		if err != nil {
			return lineErr(t.line(), "%v", err)
		}
		if !ok {
			skip()
			continue
		}
		if err := emitChecked(t.line(), row, emit); err != nil {
			return err
		}
	}
}

// umamiTimeLayouts are the forms created_at takes: SQL's text and ISO 8601.
var umamiTimeLayouts = []string{"2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999Z07:00", "2006-01-02T15:04:05.999999999"}

func umamiTime(s string) (time.Time, error) {
	for _, l := range umamiTimeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("created_at: want a time such as 2024-03-15 10:00:00, got %s", quote(s))
}

// umamiRow is the row of one Umami event whose columns get gives (UTC
// times without a zone), with its event_data as properties; ok is false
// for an event type that is not imported.
func umamiRow(get func(string) string, data map[string]any) (row Row, ok bool, err error) {
	id, session := get("event_id"), get("session_id")
	if id == "" {
		return row, false, errors.New("event_id is empty")
	}
	if session == "" {
		return row, false, errors.New("session_id is empty")
	}
	ts, err := umamiTime(get("created_at"))
	if err != nil {
		return row, false, err
	}
	row = Row{ID: SourceID("umami", id), TS: ts.Format(time.RFC3339Nano), AnonID: session,
		Browser: umamiBrowser(get("browser")), OS: umamiOS(get("os")), DeviceType: umamiDevice(get("device")),
		City: get("city"), UserID: ptr(get("distinct_id"))}
	if c := strings.ToUpper(strings.TrimSpace(get("country"))); c != "" {
		if !validCountry(c) {
			return row, false, fmt.Errorf("country: want two letters, got %s", quote(get("country")))
		}
		row.Country = c
	}
	props := map[string]any{}
	for k, v := range data {
		props[k] = v
	}
	switch get("event_type") {
	case "1":
		row.Type = "pageview"
	case "2":
		name := get("event_name")
		if name == "" {
			return row, false, errors.New("event_name is empty for a custom event (event_type 2)")
		}
		typ, exact := eventType(name)
		row.Type = typ
		if !exact {
			props["name"] = name
		}
	case "":
		return row, false, errors.New("event_type is empty")
	default:
		return row, false, nil
	}
	if len(props) > 0 {
		row.Properties, _ = json.Marshal(props)
	}
	row.URL = ptr(joinURL(get("hostname"), get("url_path"), get("url_query")))
	if d := get("referrer_domain"); d != "" {
		row.Referrer = ptr(joinURL(d, get("referrer_path"), get("referrer_query")))
	}
	return row, true, nil
}

// joinURL makes a URL of a host, a path and a query (with or without its
// "?"); without a host, the path and query alone.
func joinURL(host, path, query string) string {
	if path == "" && host != "" {
		path = "/"
	}
	u := path
	if host != "" {
		u = "https://" + host + path
	}
	if query = strings.TrimPrefix(query, "?"); query != "" {
		u += "?" + query
	}
	return u
}

// umamiBrowsers maps the names Umami stores (those of the detect-browser
// package it uses) to ours.
var umamiBrowsers = map[string]string{
	"chrome": "Chrome", "crios": "Chrome", "chromium-webview": "Chrome", "firefox": "Firefox", "fxios": "Firefox",
	"safari": "Safari", "ios": "Mobile Safari", "ios-webview": "Mobile Safari", "edge": "Edge",
	"edge-chromium": "Edge", "edge-ios": "Edge", "opera": "Opera", "opera-mini": "Opera Mini",
	"samsung": "Samsung Browser", "android": "Android Browser", "ie": "IE", "yandexbrowser": "Yandex Browser",
	"silk": "Amazon Silk", "vivaldi": "Vivaldi",
}

func umamiBrowser(s string) string {
	if b, ok := umamiBrowsers[strings.ToLower(s)]; ok {
		return b
	}
	return s
}

func umamiOS(s string) string {
	l := strings.ToLower(s)
	switch {
	case strings.HasPrefix(l, "windows"):
		return "Windows"
	case l == "mac os" || l == "macos" || l == "mac os x":
		return "macOS"
	case l == "ios":
		return "iOS"
	case strings.HasPrefix(l, "android"):
		return "Android"
	case l == "linux":
		return "Linux"
	case l == "chrome os" || l == "chromeos":
		return "ChromeOS"
	}
	return s
}

func umamiDevice(s string) string {
	switch strings.ToLower(s) {
	case "":
		return ""
	case "desktop", "laptop":
		return "desktop"
	case "mobile":
		return "mobile"
	case "tablet":
		return "tablet"
	}
	return "other"
}
