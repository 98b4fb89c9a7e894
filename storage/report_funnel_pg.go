package storage

import (
	"context"
	"database/sql"
)

// walkFunnel is PostgreSQL's funnel read (docs/postgresql.md#on-postgresql): it
// cannot call Go, so the events are streamed to Go ordered by visit, and
// each visit's are handed to w when the next visit begins. Each event's
// type and page are those SQLite's funnelEvent strings together; a step
// with a property reads events.props, which holds the properties object
// propText reads from the wire text.
func (pgDialect) walkFunnel(ctx context.Context, read *sql.DB, w *funnelWalk, r *funnelRead) error {
	cols := `e.type, CASE WHEN e.type = 'pageview' THEN e.url END, `
	if r.pages {
		cols = `COALESCE(p.name, 'pageview'), CASE WHEN p.name IS NULL THEN p.path END, `
	}
	props := `NULL`
	if r.props {
		props = `e.props::text`
	}
	rows, err := read.QueryContext(ctx, `SELECT (`+r.key+`)::text, s.id, e.ts_ms, e.seq, `+cols+props+`
		`+r.body+`
		ORDER BY s.id`, r.args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	var (
		anon, prev   string
		visit, last  int64
		url, propsOf sql.NullString
		evs          []funnelEventRow
	)
	for first := true; rows.Next(); first = false {
		var e funnelEventRow
		if err := rows.Scan(&anon, &visit, &e.ts, &e.seq, &e.typ, &url, &propsOf); err != nil {
			return err
		}
		if !first && visit != last {
			w.walk(prev, evs)
			evs = evs[:0]
		}
		prev, last = anon, visit
		e.url, e.hasURL = url.String, url.Valid
		if propsOf.Valid {
			// propText reads an event's wire text; only its properties
			// matter there.
			e.raw = `{"properties":` + propsOf.String + `}`
		}
		evs = append(evs, e)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(evs) > 0 {
		w.walk(prev, evs)
	}
	return nil
}
