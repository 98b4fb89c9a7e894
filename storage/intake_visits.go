package storage

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"modernc.org/sqlite"
)

// A visit is a session (docs/intake.md#identity-and-sessions) with the
// attributes of docs/intake.md#visits: entry and exit pages, pageviews, the
// referrer and source, the landing event's campaign, location and agent.
// Each attribute is the minimum or maximum of its events by time, with a
// fixed tie-break, so combining visits is associative and commutative:
// events folded in any order, and sessions merged in any order, give the
// same attributes.

// Campaign is the campaign a wire format states for an event besides its
// URL's utm_* parameters (Segment's context.campaign); an empty field
// leaves the URL's parameter in force.
type Campaign struct {
	Source, Medium, Name, Term, Content string
}

// visitTextMax caps each text attribute, in bytes: a URL may be up to the
// body limit long, a visit row stays small.
const visitTextMax = 512

// landing is what a visit takes from its earliest event; "" is NULL.
type landing struct {
	utm                                [5]string // source, medium, campaign, term, content
	country, city, browser, os, device string
	region, cityID                     string // migration 0028
}

// less orders landings of events at the same millisecond, so that which
// one is the landing never depends on arrival order.
func (l landing) less(o landing) bool {
	a := [12]string{l.utm[0], l.utm[1], l.utm[2], l.utm[3], l.utm[4], l.country, l.city, l.browser, l.os, l.device, l.region, l.cityID}
	b := [12]string{o.utm[0], o.utm[1], o.utm[2], o.utm[3], o.utm[4], o.country, o.city, o.browser, o.os, o.device, o.region, o.cityID}
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// visit is a session's visit attributes as the writer keeps them, with
// absolute times ("" is NULL).
type visit struct {
	// ready is false for a row of before migration 0013 whose attributes
	// are not computed yet.
	ready      bool
	empty      bool // no event folded in yet
	pageviews  int64
	entry      string // path of the earliest pageview, "" without one
	entryAt    time.Time
	exit       string
	exitAt     time.Time
	referrer   string
	referrerAt time.Time
	landingAt  time.Time
	// landing is nil in the sessions memo (see latestSessions), which
	// lends a visit only to events later than its landing.
	landing *landing
}

// newVisit is the visit of no event.
func newVisit() visit { return visit{ready: true, empty: true, landing: &landing{}} }

// add folds one event (ts truncated to the millisecond) into v. The
// costlier parts (the page's path, the referrer, the landing's campaign)
// are computed only when the event can change them.
func (v *visit) add(e *IngestEvent, ts time.Time) {
	if e.Type == "pageview" {
		v.pageviews++
		if v.entry == "" || !ts.After(v.entryAt) || !ts.Before(v.exitAt) {
			p := PagePath(deref(e.URL))
			v.page(p, ts, p, ts)
		}
	}
	if e.Referrer != nil && *e.Referrer != "" && (v.referrer == "" || !ts.After(v.referrerAt)) {
		if r := visitReferrer(e.URL, e.Referrer); r != "" {
			v.referrerFrom(r, ts)
		}
	}
	if v.empty || !ts.After(v.landingAt) {
		v.landFrom(landingOf(e), ts)
	}
	v.empty = false
}

// page takes a visit's entry (the earliest pageview; at equal times the
// smaller path) and exit (the latest; at equal times the larger path).
func (v *visit) page(entry string, entryAt time.Time, exit string, exitAt time.Time) {
	if entry == "" {
		return
	}
	if v.entry == "" || entryAt.Before(v.entryAt) || entryAt.Equal(v.entryAt) && entry < v.entry {
		v.entry, v.entryAt = entry, entryAt
	}
	if v.exit == "" || exitAt.After(v.exitAt) || exitAt.Equal(v.exitAt) && exit > v.exit {
		v.exit, v.exitAt = exit, exitAt
	}
}

// referrerFrom takes r when it is earlier (at equal times, smaller).
func (v *visit) referrerFrom(r string, at time.Time) {
	if r == "" {
		return
	}
	if v.referrer == "" || at.Before(v.referrerAt) || at.Equal(v.referrerAt) && r < v.referrer {
		v.referrer, v.referrerAt = r, at
	}
}

// landFrom takes l when it is earlier (at equal times, smaller).
func (v *visit) landFrom(l landing, at time.Time) {
	if v.empty || at.Before(v.landingAt) || at.Equal(v.landingAt) && l.less(*v.landing) {
		v.landing, v.landingAt = &l, at
	}
}

// merge folds o, the visit of another session, into v.
func (v *visit) merge(o visit) {
	if o.empty {
		return
	}
	v.pageviews += o.pageviews
	if o.entry != "" {
		v.page(o.entry, o.entryAt, o.exit, o.exitAt)
	}
	v.referrerFrom(o.referrer, o.referrerAt)
	v.landFrom(*o.landing, o.landingAt)
	v.empty = false
}

// landingOf is an event's landing attributes: its campaign (where the
// format states one), else its URL's utm_* parameters; its location and
// agent.
func landingOf(e *IngestEvent) landing {
	l := landing{country: e.Country, city: capText(e.City), browser: e.Browser, os: e.OS, device: e.DeviceType,
		region: capText(e.Region), cityID: capText(e.CityID)}
	if e.URL != nil && strings.Contains(*e.URL, "utm_") {
		if i := strings.IndexByte(*e.URL, '?'); i >= 0 {
			q := (*e.URL)[i+1:]
			if j := strings.IndexByte(q, '#'); j >= 0 {
				q = q[:j]
			}
			// A malformed pair is skipped; the others count.
			values, _ := url.ParseQuery(q)
			for k, name := range [5]string{"utm_source", "utm_medium", "utm_campaign", "utm_term", "utm_content"} {
				l.utm[k] = capText(strings.TrimSpace(values.Get(name)))
			}
		}
	}
	if c := e.Campaign; c != nil {
		for k, s := range [5]string{c.Source, c.Medium, c.Name, c.Term, c.Content} {
			if s = capText(strings.TrimSpace(s)); s != "" {
				l.utm[k] = s
			}
		}
	}
	return l
}

// PagePath is a URL's page as visits and the query API name it: its path
// only, percent-decoded (no scheme, host, query or fragment), "/" when
// empty. The path of a URL that does not parse (a bad escape) is kept as
// sent.
func PagePath(raw string) string {
	var p string
	if u, err := url.Parse(raw); err == nil {
		p = u.Path
		if u.Opaque != "" {
			p = u.Opaque
		}
	} else {
		p = raw
		if i := strings.IndexAny(p, "?#"); i >= 0 {
			p = p[:i]
		}
		if i := strings.Index(p, "//"); i >= 0 && !strings.Contains(p[:i], "/") {
			p = p[i+2:] // scheme:// and host
			if j := strings.IndexByte(p, '/'); j >= 0 {
				p = p[j:]
			} else {
				p = ""
			}
		}
	}
	if p == "" {
		return "/"
	}
	return capText(p)
}

// visitReferrer is an event's referrer as a visit's referrer, the way
// Plausible shows visit:referrer: the referring URL's host in lower case
// without "www.", then its path without trailing slashes (no scheme, query
// or fragment); an android-app referrer keeps its "android-app://". It is
// "" for a referrer that is not an http(s) or android-app URL with a host,
// for localhost, and for one from the page's own host (a self-referral).
func visitReferrer(page, ref *string) string {
	r, err := url.Parse(strings.TrimSpace(*ref))
	if err != nil || r.Hostname() == "" {
		return ""
	}
	scheme := strings.ToLower(r.Scheme)
	if scheme != "http" && scheme != "https" && scheme != "android-app" {
		return ""
	}
	host := strings.TrimPrefix(strings.ToLower(r.Hostname()), "www.")
	if host == "localhost" {
		return ""
	}
	if page != nil {
		if p, err := url.Parse(strings.TrimSpace(*page)); err == nil && strings.TrimPrefix(strings.ToLower(p.Hostname()), "www.") == host {
			return ""
		}
	}
	if scheme == "android-app" {
		host = "android-app://" + host
	}
	return capText(host + strings.TrimRight(r.EscapedPath(), "/"))
}

// capText cuts s to visitTextMax bytes, at a character boundary.
func capText(s string) string {
	if len(s) <= visitTextMax {
		return s
	}
	s = s[:visitTextMax]
	if r, size := utf8.DecodeLastRuneInString(s); r == utf8.RuneError && size == 1 {
		// Cut inside a character: drop its first bytes too.
		i := len(s) - 1
		for i > 0 && len(s)-i < utf8.UTFMax && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i]
	}
	return s
}

// visitColumns are the sessions columns of a visit as read, in the order
// of visitScan.dests; source, browser, os and device are generated
// columns (migration 0016).
const visitColumns = `entry_page, exit_page, pageviews, referrer, source, utm_source, utm_medium, utm_campaign, utm_term,
	utm_content, country, city, browser, os, device, entry_ms, exit_ms, referrer_ms, visit_ready, region, city_id`

// visitStoredColumns are the sessions columns of a visit as written, in
// the order of visit.args: source is derived when read (source_text stays
// NULL), the agent is a code or, off the lists, text (intake_visit_codes.go).
const visitStoredColumns = `entry_page, exit_page, pageviews, referrer, utm_source, utm_medium, utm_campaign, utm_term,
	utm_content, country, city, browser_text, os_text, device_text, agent, entry_ms, exit_ms, referrer_ms, visit_ready, region, city_id`

// visitSet assigns visitStoredColumns in an UPDATE, and clears the source
// of a row stored before migration 0016.
const visitSet = `entry_page = ?, exit_page = ?, pageviews = ?, referrer = ?, utm_source = ?, utm_medium = ?,
	utm_campaign = ?, utm_term = ?, utm_content = ?, country = ?, city = ?, browser_text = ?, os_text = ?, device_text = ?, agent = ?,
	entry_ms = ?, exit_ms = ?, referrer_ms = ?, visit_ready = ?, region = ?, city_id = ?, source_text = NULL`

// args are the values of visitStoredColumns for a session from start to
// end.
func (v *visit) args(start, end time.Time) []any {
	var entryMS, exitMS, refMS any
	if v.entry != "" {
		entryMS, exitMS = v.entryAt.Sub(start).Milliseconds(), end.Sub(v.exitAt).Milliseconds()
	}
	if v.referrer != "" {
		refMS = v.referrerAt.Sub(start).Milliseconds()
	}
	ready := 0
	if v.ready {
		ready = 1
	}
	l := v.landing
	if l == nil {
		// visitTailSet: the landing's columns stay.
		return []any{nullable(v.entry), nullable(v.exit), v.pageviews, nullable(v.referrer), entryMS, exitMS, refMS, ready}
	}
	var agent any
	browser, os, device := nullable(l.browser), nullable(l.os), nullable(l.device)
	if code, ok := agentCode(l.browser, l.os, l.device); ok {
		agent, browser, os, device = code, nil, nil, nil
	}
	return []any{nullable(v.entry), nullable(v.exit), v.pageviews, nullable(v.referrer),
		nullable(l.utm[0]), nullable(l.utm[1]), nullable(l.utm[2]), nullable(l.utm[3]), nullable(l.utm[4]),
		nullable(l.country), nullable(l.city), browser, os, device, agent,
		entryMS, exitMS, refMS, ready, nullable(l.region), nullable(l.cityID)}
}

// visitTailSet assigns what visit.args gives for a visit without its
// landing: every column but the landing's.
const visitTailSet = `entry_page = ?, exit_page = ?, pageviews = ?, referrer = ?, source_text = NULL,
	entry_ms = ?, exit_ms = ?, referrer_ms = ?, visit_ready = ?`

// visitScan receives visitColumns (but source, which is derived).
type visitScan struct {
	entry, exit, referrer, source      sql.NullString
	utm                                [5]sql.NullString
	country, city, browser, os, device sql.NullString
	region, cityID                     sql.NullString
	pageviews                          int64
	entryMS, exitMS, refMS             sql.NullInt64
	ready                              int64
}

// dests are the scan destinations of visitColumns.
func (s *visitScan) dests() []any {
	return []any{&s.entry, &s.exit, &s.pageviews, &s.referrer, &s.source, &s.utm[0], &s.utm[1], &s.utm[2], &s.utm[3], &s.utm[4],
		&s.country, &s.city, &s.browser, &s.os, &s.device, &s.entryMS, &s.exitMS, &s.refMS, &s.ready, &s.region, &s.cityID}
}

// visit is the scanned row's visit, for a session from start to end.
func (s *visitScan) visit(start, end time.Time, count int64) visit {
	v := visit{ready: s.ready == 1, empty: count == 0, pageviews: s.pageviews, entry: s.entry.String, exit: s.exit.String,
		referrer: s.referrer.String, landingAt: start}
	if s.entryMS.Valid {
		v.entryAt = start.Add(time.Duration(s.entryMS.Int64) * time.Millisecond)
	}
	if s.exitMS.Valid {
		v.exitAt = end.Add(-time.Duration(s.exitMS.Int64) * time.Millisecond)
	}
	if s.refMS.Valid {
		v.referrerAt = start.Add(time.Duration(s.refMS.Int64) * time.Millisecond)
	}
	v.landing = &landing{country: s.country.String, city: s.city.String, browser: s.browser.String, os: s.os.String, device: s.device.String,
		region: s.region.String, cityID: s.cityID.String}
	for i := range s.utm {
		v.landing.utm[i] = s.utm[i].String
	}
	return v
}

// queryer is a read transaction, the read pool or the writer's transaction.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// visitOfEvents computes the visit of the session of site and anon from
// start to end from its stored events with seq below beforeSeq (0: all):
// for a row of before migration 0013. The landing events' raw is read for
// a campaign (campaignOfRaw).
func visitOfEvents(ctx context.Context, d dialect, q queryer, site, anon string, start, end time.Time, beforeSeq int64) (visit, error) {
	if beforeSeq <= 0 {
		beforeSeq = 1 << 62
	}
	from := FormatTime(start)
	rr := newRawRead(d)
	rows, err := q.QueryContext(ctx, `SELECT type, url, referrer, ts, country, city, browser, os, device_type,
		`+rr.rawWhen("ts = ?3")+`
		FROM events WHERE site_id = ?1 AND anon_id = ?2 AND ts_ms >= ?5 AND ts_ms <= ?6 AND seq < ?4`,
		site, anon, from, beforeSeq, start.UnixMilli(), end.UnixMilli())
	if err != nil {
		return visit{}, fmt.Errorf("visit of events: %w", err)
	}
	defer rows.Close()
	v := newVisit()
	for rows.Next() {
		var e IngestEvent
		var ts string
		var country, city, browser, os, device sql.NullString
		if err := rows.Scan(append([]any{&e.Type, &e.URL, &e.Referrer, &ts, &country, &city, &browser, &os, &device}, rr.rawTargets()...)...); err != nil {
			return visit{}, fmt.Errorf("visit of events: %w", err)
		}
		if err := rr.rawDecode(); err != nil {
			return visit{}, fmt.Errorf("visit of events: %w", err)
		}
		raw := rr.Raw
		at, err := time.Parse(timeLayout, ts)
		if err != nil {
			return visit{}, fmt.Errorf("visit of events: ts %q: %w", ts, err)
		}
		e.Country, e.City, e.Browser, e.OS, e.DeviceType = country.String, city.String, browser.String, os.String, device.String
		if raw.Valid {
			e.Campaign = campaignOfRaw([]byte(raw.String))
		}
		v.add(&e, at)
	}
	return v, rows.Err()
}

// campaignOfRaw is the campaign a stored event's raw states: the
// context.campaign of a Segment message (whose raw has no top-level
// anon_id, which every event of Tally's own format has), else nil. A batch
// element's raw holds its own context only, so a campaign stated for a
// whole batch is not found here (docs/intake.md#visits).
func campaignOfRaw(raw []byte) *Campaign {
	if !strings.Contains(string(raw), `"campaign"`) {
		return nil
	}
	var m struct {
		AnonID  json.RawMessage `json:"anon_id"`
		Context struct {
			Campaign json.RawMessage `json:"campaign"`
		} `json:"context"`
	}
	if json.Unmarshal(raw, &m) != nil || m.AnonID != nil {
		return nil
	}
	return ParseCampaign(m.Context.Campaign)
}

// ParseCampaign reads a Segment context.campaign object (name is the
// campaign, the others their utm_ namesakes); nil when it is not an
// object. Fields that are not strings are ignored.
func ParseCampaign(obj json.RawMessage) *Campaign {
	var m map[string]any
	if len(obj) == 0 || obj[0] != '{' || json.Unmarshal(obj, &m) != nil {
		return nil
	}
	str := func(k string) string {
		s, _ := m[k].(string)
		return s
	}
	return &Campaign{Source: str("source"), Medium: str("medium"), Name: str("name"), Term: str("term"), Content: str("content")}
}

func init() {
	// page_path(url) is PagePath, so that SQL can group events by the
	// pages that visits name.
	sqlite.MustRegisterDeterministicScalarFunction("page_path", 1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		switch v := args[0].(type) {
		case string:
			return PagePath(v), nil
		case []byte:
			return PagePath(string(v)), nil
		}
		return nil, nil
	})
}
