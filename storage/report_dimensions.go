package storage

import (
	"context"
	"net/url"
	"strings"
	"time"
)

// Dimensions are the breakdowns kept for pageviews.
var Dimensions = []string{"url", "referrer", "country", "browser", "os", "device_type"}

type dimKey struct{ site, day, dim, value string }

// dimensionValues returns the breakdown values of a pageview: the url
// without query and fragment, the referrer's host, and the enrichment.
func dimensionValues(urlStr, referrer *string, country, browser, os, device string) [6]string {
	return [6]string{pageURL(urlStr), referrerHost(referrer), country, browser, os, device}
}

// pageURL cuts a URL before its query string and fragment, so one page is
// one row however it was linked.
func pageURL(p *string) string {
	if p == nil {
		return ""
	}
	s := *p
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i]
	}
	if len(s) > 512 {
		s = s[:512]
	}
	return s
}

// referrerHost is the referring site: the host of the referrer URL.
func referrerHost(p *string) string {
	if p == nil || *p == "" {
		return ""
	}
	if u, err := url.Parse(*p); err == nil && u.Host != "" {
		return strings.TrimPrefix(strings.ToLower(u.Host), "www.")
	}
	return pageURL(p)
}

// BreakdownRow is one value of a dimension and its pageviews.
type BreakdownRow struct {
	Value *string
	Count int64
}

// Breakdown counts pageviews in from..to by one dimension, count
// descending then value ascending; an absent value is null.
func (db *DB) Breakdown(ctx context.Context, site, dimension string, from, to time.Time, limit int) ([]BreakdownRow, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT value, SUM(count) AS n FROM daily_dimensions
		WHERE site_id = ? AND dimension = ? AND day BETWEEN ? AND ? GROUP BY value HAVING SUM(count) > 0
		ORDER BY n DESC, value ASC LIMIT ?`, site, dimension, from.Format(dayLayout), to.Format(dayLayout), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	list := []BreakdownRow{}
	for rows.Next() {
		var v string
		var r BreakdownRow
		if err := rows.Scan(&v, &r.Count); err != nil {
			return nil, err
		}
		if v != "" {
			r.Value = &v
		}
		list = append(list, r)
	}
	return list, rows.Err()
}
