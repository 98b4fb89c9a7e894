package importer

import (
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// GoatCounter's CSV export, format version 2: one row per pageview, the
// header `2Path,Title,Event,UserAgent,Browser,System,Session,Bot,Referrer,
// Referrer scheme,Screen size,Location,FirstVisit,Date` (the version is the
// first column's prefix). Columns and their meaning as documented in
// GoatCounter's tpl/help/export.md ("CSV format") and written by
// export.go's Export.Run (c.Write of ExportVersion+"Path", ...), both in
// github.com/arp242/goatcounter. The mapping is in docs/import.md.
var goatCounterColumns = []string{"2Path", "Title", "Event", "UserAgent", "Browser", "System", "Session", "Bot",
	"Referrer", "Referrer scheme", "Screen size", "Location", "FirstVisit", "Date"}

func readGoatCounter(r io.Reader, ids *ContentIDs, emit func(Row) error, skip func()) error {
	t, head, err := newCSVTable(r)
	if err != nil {
		return err
	}
	if len(head) == 0 || !strings.HasSuffix(head[0], "Path") {
		return lineErr(1, "not a GoatCounter CSV export: the header starts with %s, want %q", quote(first(head)), "2Path")
	}
	if v := strings.TrimSuffix(strings.TrimPrefix(head[0], "\ufeff"), "Path"); v != "2" {
		return lineErr(1, "GoatCounter export format version %s; this reads version 2 (export again from a GoatCounter of 2021 or later)", quote(v))
	}
	if len(head) != len(goatCounterColumns) {
		return lineErr(1, "the header has %d columns, GoatCounter's version 2 has %d", len(head), len(goatCounterColumns))
	}
	for {
		err := t.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		line := t.line()
		rec := t.rec
		if len(rec) != len(goatCounterColumns) {
			return lineErr(line, "%d fields, want %d", len(rec), len(goatCounterColumns))
		}
		path, event, session, bot := rec[0], rec[2], rec[6], rec[7]
		if bot != "" && bot != "0" {
			if _, err := strconv.Atoi(bot); err != nil {
				return lineErr(line, "Bot: want a number, got %s", quote(bot))
			}
			skip()
			continue
		}
		if path == "" {
			return lineErr(line, "Path is empty")
		}
		ts, err := time.Parse(time.RFC3339, rec[13])
		if err != nil {
			return lineErr(line, "Date: want an RFC 3339 time, got %s", quote(rec[13]))
		}
		isEvent, err := strconv.ParseBool(event)
		if err != nil {
			return lineErr(line, "Event: want true or false, got %s", quote(event))
		}
		row := Row{ID: ids.ID("goatcounter", rec...), TS: ts.UTC().Format(time.RFC3339Nano), AnonID: session,
			Browser: withoutVersion(rec[4]), OS: systemName(rec[5]), DeviceType: deviceOfScreen(rec[10])}
		if row.AnonID == "" {
			row.AnonID = row.ID // no session: a visitor of its own
		}
		if loc := rec[11]; loc != "" {
			row.Country = strings.ToUpper(strings.SplitN(loc, "-", 2)[0])
			if !validCountry(row.Country) {
				return lineErr(line, "Location: want an ISO 3166 code (US or US-TX), got %s", quote(loc))
			}
		}
		page := path
		if isEvent {
			// The path is the event's name.
			typ, exact := eventType(path)
			row.Type = typ
			if !exact {
				row.Properties, _ = json.Marshal(map[string]string{"name": path})
			}
			page = ""
		} else {
			row.Type = "pageview"
			if !strings.HasPrefix(page, "/") {
				page = "/" + page
			}
		}
		ref, scheme := rec[8], rec[9]
		switch {
		case ref == "":
		case scheme == "h" || (scheme == "o" && strings.Contains(ref, "://")):
			if !strings.Contains(ref, "://") {
				ref = "https://" + ref
			}
			row.Referrer = &ref
		default:
			// A campaign (c), a generated name (g, "Hacker News") or another
			// text: the visit's source, as utm_source on the page.
			if page != "" {
				sep := "?"
				if strings.Contains(page, "?") {
					sep = "&"
				}
				page += sep + "utm_source=" + url.QueryEscape(ref)
			}
		}
		row.URL = ptr(page)
		if err := emitChecked(line, row, emit); err != nil {
			return err
		}
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// withoutVersion is "Chrome 120.0" without its version: the words from
// the first that starts with a digit on.
func withoutVersion(s string) string {
	f := strings.Fields(s)
	for i, w := range f {
		if w[0] >= '0' && w[0] <= '9' {
			f = f[:i]
			break
		}
	}
	return strings.Join(f, " ")
}

// systemName is GoatCounter's System ("Windows 10", "macOS 14.1") as our
// OS family.
func systemName(s string) string {
	name := withoutVersion(s)
	switch strings.ToLower(name) {
	case "chrome os", "chromeos":
		return "ChromeOS"
	case "macos", "mac os x", "mac os":
		return "macOS"
	case "ios":
		return "iOS"
	}
	return name
}

// deviceOfScreen is the device type of a screen size "width,height,scale"
// by its width, with Plausible's bounds: under 576 mobile, under 992
// tablet, else desktop; "" when unknown.
func deviceOfScreen(s string) string {
	w, err := strconv.ParseFloat(strings.SplitN(s, ",", 2)[0], 64)
	switch {
	case err != nil || w <= 0:
		return ""
	case w < 576:
		return "mobile"
	case w < 992:
		return "tablet"
	}
	return "desktop"
}
