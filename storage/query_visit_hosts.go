package storage

import "slices"

// An event:hostname filter on a breakdown by a visit's acquisition or its
// entry or exit page keeps the visits that entered (or left) on that host,
// as Plausible's query optimizer does (extend_hostname_filters_to_visit):
// without it, a visit that came from Facebook to blog.example.com and went
// on to app.example.com would show Facebook among app.example.com's
// sources. docs/query-api.md#hostnames.

// The visit's entry and exit hosts: filters the reads test, never
// dimensions of the query API (parseQuery names them unsupported).
const (
	entryHostDim = "visit:entry_page_hostname"
	exitHostDim  = "visit:exit_page_hostname"
)

// visitHostDims maps each dimension whose breakdown an event:hostname
// filter extends to the visit host it then tests too.
var visitHostDims = map[string]string{
	"visit:source":       entryHostDim,
	"visit:referrer":     entryHostDim,
	"visit:entry_page":   entryHostDim,
	"visit:utm_medium":   entryHostDim,
	"visit:utm_source":   entryHostDim,
	"visit:utm_campaign": entryHostDim,
	"visit:utm_content":  entryHostDim,
	"visit:utm_term":     entryHostDim,
	"visit:exit_page":    exitHostDim,
}

// withVisitHosts is fs with each top-level event:hostname filter repeated
// on the visit host of each of dims that visitHostDims names (once, however
// often it is called). Only top-level filters: Plausible allows
// event:hostname nowhere else.
func withVisitHosts(fs []QueryFilter, dims []string) []QueryFilter {
	var extra []QueryFilter
	for _, d := range dims {
		host, ok := visitHostDims[d]
		if !ok || slices.ContainsFunc(fs, func(f QueryFilter) bool { return f.Dim == host }) ||
			slices.ContainsFunc(extra, func(f QueryFilter) bool { return f.Dim == host }) {
			continue
		}
		for _, f := range fs {
			if f.Dim == HostnameDimension {
				f.Dim = host
				extra = append(extra, f)
			}
		}
	}
	if extra == nil {
		return fs
	}
	return append(slices.Clip(fs), extra...)
}

// visitHostSQL is the host of the visit's (alias s) entry pageview (or,
// exit, its exit pageview), as event:hostname shows it, "(not set)"
// without one. The pageview is the visit's at the entry's (exit's) time;
// of two at that millisecond, the smaller host. The subquery's events are
// aliased e, hiding the outer read's, so that the dialect's pageHost reads
// them.
func (b *sqlBuilder) visitHostSQL(exit bool) string {
	at := visitStartMS("s") + " + s.entry_ms"
	if exit {
		at = visitEndMS("s") + " - s.exit_ms"
	}
	return "COALESCE((SELECT MIN(" + b.q.dialect().pageHost() + ") FROM events e WHERE e.site_id = s.site_id AND e.anon_id = s.anon_id AND e.ts_ms = " +
		at + " AND e.type = 'pageview'), '" + NotSet + "')"
}
