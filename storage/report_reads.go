package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/tally-analytics/tally/fault"
)

// DayCount is one day of a per-day series.
type DayCount struct {
	Date  string
	Count int64
}

// NameCount is one event type and its count.
type NameCount struct {
	Name  string
	Count int64
}

// SessionStats summarises the sessions that start in a range.
type SessionStats struct {
	Count        int64
	AvgDurationS float64
	AvgEvents    float64
	BounceRate   float64
}

// dayLayout is the format of rollup days and of read ranges.
const dayLayout = time.DateOnly

// Pageviews returns the pageview count of every day from..to (inclusive,
// UTC days), zero-filled, oldest first, and their total. It reads the
// daily_events rollup only.
func (db *DB) Pageviews(ctx context.Context, site string, from, to time.Time) (int64, []DayCount, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT day, count FROM daily_events
		WHERE site_id = ? AND type = 'pageview' AND day BETWEEN ? AND ?`,
		site, from.Format(dayLayout), to.Format(dayLayout))
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	counts := map[string]int64{}
	for rows.Next() {
		var day string
		var n int64
		if err := rows.Scan(&day, &n); err != nil {
			return 0, nil, err
		}
		counts[day] = n
	}
	if err := rows.Err(); err != nil {
		return 0, nil, err
	}
	var total int64
	days := []DayCount{}
	for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
		key := d.Format(dayLayout)
		days = append(days, DayCount{Date: key, Count: counts[key]})
		total += counts[key]
	}
	return total, days, nil
}

// EventCounts returns the count of each event type in from..to, by count
// descending, then name ascending.
func (db *DB) EventCounts(ctx context.Context, site string, from, to time.Time) ([]NameCount, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT type, SUM(count) AS n FROM daily_events
		WHERE site_id = ? AND day BETWEEN ? AND ? GROUP BY type HAVING SUM(count) > 0 ORDER BY n DESC, type ASC`,
		site, from.Format(dayLayout), to.Format(dayLayout))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	list := []NameCount{}
	for rows.Next() {
		var nc NameCount
		if err := rows.Scan(&nc.Name, &nc.Count); err != nil {
			return nil, err
		}
		list = append(list, nc)
	}
	return list, rows.Err()
}

// Sessions summarises the sessions starting in from..to; an empty range
// gives zeros.
func (db *DB) Sessions(ctx context.Context, site string, from, to time.Time) (SessionStats, error) {
	var count, durMS, events, bounces int64
	err := db.read.QueryRowContext(ctx, `SELECT COALESCE(SUM(sessions), 0), COALESCE(SUM(duration_ms), 0),
		COALESCE(SUM(events), 0), COALESCE(SUM(bounces), 0) FROM daily_sessions
		WHERE site_id = ? AND day BETWEEN ? AND ?`, site, from.Format(dayLayout), to.Format(dayLayout)).
		Scan(&count, &durMS, &events, &bounces)
	if err != nil || count <= 0 {
		return SessionStats{}, err
	}
	n := float64(count)
	return SessionStats{Count: count, AvgDurationS: float64(durMS) / 1000 / n,
		AvgEvents: float64(events) / n, BounceRate: float64(bounces) / n}, nil
}

// TimelineEvent is an event as the per-user timeline shows it: no raw
// payload and no user agent, which may carry personal data.
type TimelineEvent struct {
	ID         string
	Type       string
	URL        *string
	TS         string
	AnonID     string
	Referrer   *string
	Country    *string
	City       *string
	Browser    *string
	OS         *string
	DeviceType *string

	seq int64
}

// timelineColumns are an event's columns as the timeline shows them, from
// events aliased e.
const timelineColumns = `e.seq, e.id, e.type, e.url, e.ts, e.anon_id, e.referrer, e.country, e.city, e.browser, e.os, e.device_type`

// timelineEvents joins the user's links (?1 the site, ?2 the user), read
// from l, to their anon ids' events; the caller appends conditions on e.
// CROSS JOIN and INDEXED BY fix the plan: the user's links first, by the
// (site_id, user_id) index, then each one's events. Left to itself, SQLite
// walks every event of the site and looks each one's link up.
func timelineEvents(d dialect, l linkTables) string {
	return `SELECT ` + timelineColumns + ` FROM ` + l.byUser("l") + ` ` + d.CrossJoin() + ` events e
	ON e.site_id = l.site_id AND e.anon_id = l.anon_id WHERE l.site_id = ?1 AND l.user_id = ?2`
}

// timelineNewest is the newest ?4 events of the user ?2 on site ?1 with ts
// before ?3, newest first. Each anon id's candidates are its events from
// its ?4-th newest ts on (a backward walk of at most ?4 entries of the
// (site_id, anon_id, ts) index, for its bound, then a range of it): a long
// history costs no more than a short one. The candidates of all anon ids
// are ranked from that index alone (ts is in it, seq is its rowid), and
// only the ?4 kept are read from the table: a user linked to 200 devices
// reads 101 rows rather than every event of every device
// (docs/benchmarks.md#reads).
func timelineNewest(d dialect, l linkTables) string {
	return `SELECT ` + timelineColumns + ` FROM events e WHERE e.seq IN (
	SELECT x.seq FROM ` + l.byUser("l") + ` ` + d.CrossJoin() + ` events x` + d.IndexedBy("events_site_anon_ts") + `
	ON x.site_id = l.site_id AND x.anon_id = l.anon_id AND x.ts_ms < ?3 AND x.ts_ms >= COALESCE((SELECT ts_ms FROM events
		WHERE site_id = l.site_id AND anon_id = l.anon_id AND ts_ms < ?3 ORDER BY ts_ms DESC LIMIT 1 OFFSET ?4 - 1), ` + minTSMS + `)
	WHERE l.site_id = ?1 AND l.user_id = ?2 ORDER BY x.ts_ms DESC, x.seq DESC LIMIT ?4)
	ORDER BY e.ts DESC, e.seq DESC`
}

// minTSMS is below every ts_ms, for a bound that excludes nothing.
const minTSMS = `-9223372036854775808`

// tsMS is the ts_ms of a ts as stored (migration 0012), for a bound on the
// index by time.
func tsMS(ts string) (int64, error) {
	t, err := time.Parse(timeLayout, ts)
	if err != nil {
		return 0, fmt.Errorf("stored ts %q: %w", ts, err)
	}
	return t.UnixMilli(), nil
}

// Timeline returns a page of the events of every anon id ever linked to
// user on site, newest first, with ts strictly before before (no bound when
// before is zero). The page holds limit events, or more when the events
// after the limit-th share its ts: a page never ends inside a group of
// equal timestamps, so the ts cursor neither skips nor repeats an event.
// next is that last ts when more events exist. It reads one snapshot, and
// joins through identity_links rather than listing the anon ids as
// parameters, so a user linked to any number of anon ids is served. A user
// without links gives a user_not_found error.
func (db *DB) Timeline(ctx context.Context, site, user string, limit int, before time.Time) ([]TimelineEvent, *string, error) {
	bound := int64(math.MaxInt64)
	if !before.IsZero() {
		bound = ceilMillisecond(before).UnixMilli()
	}
	l := db.links()
	tx, err := db.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, nil, err
	}
	defer tx.Rollback()
	var known bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM `+l.byUser("")+` WHERE site_id = ?1 AND user_id = ?2)`, site, user).Scan(&known); err != nil {
		return nil, nil, err
	}
	if !known {
		return nil, nil, fault.Errorf(fault.UserNotFound, "no user with that id has been seen on this site")
	}
	merged, err := timelineQuery(ctx, tx, timelineNewest(db.d, l), site, user, bound, limit+1)
	if err != nil {
		return nil, nil, err
	}
	if len(merged) <= limit {
		return merged, nil, nil
	}
	edge := merged[limit-1].TS
	page := merged[:0:0]
	for _, e := range merged[:limit] {
		if e.TS != edge {
			page = append(page, e)
		}
	}
	edgeMS, err := tsMS(edge)
	if err != nil {
		return nil, nil, err
	}
	tied, err := timelineQuery(ctx, tx, timelineEvents(db.d, l)+` AND e.ts_ms = ?3`, site, user, edgeMS)
	if err != nil {
		return nil, nil, err
	}
	sortTimeline(tied)
	page = append(page, tied...)
	// More events exist when anything older than the edge remains.
	var more bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (`+timelineEvents(db.d, l)+` AND e.ts_ms < ?3)`, site, user, edgeMS).Scan(&more); err != nil {
		return nil, nil, err
	}
	if !more {
		return page, nil, nil
	}
	return page, &edge, nil
}

func sortTimeline(list []TimelineEvent) {
	sort.Slice(list, func(i, j int) bool {
		if list[i].TS != list[j].TS {
			return list[i].TS > list[j].TS
		}
		return list[i].seq > list[j].seq
	})
}

func timelineQuery(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]TimelineEvent, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var list []TimelineEvent
	for rows.Next() {
		var e TimelineEvent
		if err := rows.Scan(&e.seq, &e.ID, &e.Type, &e.URL, &e.TS, &e.AnonID, &e.Referrer, &e.Country, &e.City, &e.Browser, &e.OS, &e.DeviceType); err != nil {
			return nil, err
		}
		list = append(list, e)
	}
	return list, rows.Err()
}

// scanRows reads every row of rows into maps of column name to value, for
// exports that must return complete rows whatever columns a table has.
// Columns named in jsonColumns hold JSON text and are returned as JSON.
func scanRows(rows *sql.Rows, jsonColumns ...string) ([]map[string]any, error) {
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	isJSON := map[string]bool{}
	for _, c := range jsonColumns {
		isJSON[c] = true
	}
	out := []map[string]any{}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make(map[string]any, len(cols))
		for i, c := range cols {
			v := vals[i]
			if b, ok := v.([]byte); ok {
				v = string(b)
			}
			if s, ok := v.(string); ok && isJSON[c] {
				v = rawJSON(s)
			}
			row[c] = v
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// rawJSON is stored JSON text returned as JSON rather than as a string.
type rawJSON string

// MarshalJSON returns the text itself, or a JSON string of it when it is
// not valid JSON (so a damaged row still exports).
func (r rawJSON) MarshalJSON() ([]byte, error) {
	if json.Valid([]byte(r)) {
		return []byte(r), nil
	}
	return []byte(fmt.Sprintf("%q", string(r))), nil
}

// StoredEvent is an event row as stored, for tests and dev tools. It is
// servertest's Event, so its JSON form is what test suites see when they
// encode one.
type StoredEvent struct {
	ID         string          `json:"id"`
	SiteID     string          `json:"site_id"`
	Type       string          `json:"type"`
	AnonID     string          `json:"anon_id"`
	UserID     *string         `json:"user_id"`
	URL        *string         `json:"url"`
	Referrer   *string         `json:"referrer"`
	TS         string          `json:"ts"`
	Country    *string         `json:"country"`
	City       *string         `json:"city"`
	Browser    *string         `json:"browser"`
	OS         *string         `json:"os"`
	DeviceType *string         `json:"device_type"`
	Raw        json.RawMessage `json:"raw"`
	ReceivedAt string          `json:"received_at"`
}

// SiteEvents returns every stored event of site in arrival order.
func (db *DB) SiteEvents(ctx context.Context, site string) ([]StoredEvent, error) {
	rr := newRawRead(db.d)
	rows, err := db.read.QueryContext(ctx, `SELECT id, site_id, type, anon_id, user_id, url, referrer, ts, country, city,
		browser, os, device_type, `+rr.columns()+` FROM events WHERE site_id = ? ORDER BY seq`, site)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	list := []StoredEvent{}
	for rows.Next() {
		var e StoredEvent
		if err := rows.Scan(append([]any{&e.ID, &e.SiteID, &e.Type, &e.AnonID, &e.UserID, &e.URL, &e.Referrer, &e.TS, &e.Country, &e.City,
			&e.Browser, &e.OS, &e.DeviceType}, rr.targets()...)...); err != nil {
			return nil, err
		}
		if err := rr.decode(); err != nil {
			return nil, err
		}
		e.Raw, e.ReceivedAt = asJSON(rr.Raw.String), rr.Received.String
		list = append(list, e)
	}
	return list, rows.Err()
}
