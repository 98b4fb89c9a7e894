package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"sort"
)

// PropertyNamesMaxRows bounds the rows PropertyNames reads: the service's
// newest events, whatever their site (docs/dashboard.md).
const PropertyNamesMaxRows = 5_000

// PropertyNamesMax bounds how many names PropertyNames returns.
const PropertyNamesMax = 100

// propertyNameMaxLen leaves out names longer than a dashboard can show.
const propertyNameMaxLen = 200

// PropertyNames lists, sorted, the custom property names (the keys of
// "properties", what track() sends) of site's events among the service's
// newest maxRows events. Events have no index by site and time, but they
// are in arrival order by seq, so the newest rows are read backwards, as
// RealtimeVisitors does: the cost does not grow with the stored history,
// and a dashboard offers the names its site sends now.
func (db *DB) PropertyNames(ctx context.Context, site string, maxRows int) ([]string, error) {
	tx, err := db.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var last int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events`).Scan(&last); err != nil {
		return nil, err
	}
	// +site_id: the newest rows by seq, not the site's index.
	rr := newRawRead(db.d)
	rows, err := tx.QueryContext(ctx, `SELECT `+rr.columns()+` FROM events WHERE seq > ? AND `+db.d.NoIndex("site_id")+` = ?`, max(last-int64(maxRows), 0), site)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	seen := map[string]bool{}
	for rows.Next() {
		if err := rows.Scan(rr.targets()...); err != nil {
			return nil, err
		}
		if err := rr.decode(); err != nil {
			return nil, err
		}
		raw := rr.Raw
		var ev struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if json.Unmarshal([]byte(raw.String), &ev) != nil {
			continue
		}
		for k := range ev.Properties {
			if len(seen) < PropertyNamesMax && k != "" && len(k) <= propertyNameMaxLen {
				seen[k] = true
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(seen))
	for k := range seen {
		names = append(names, k)
	}
	sort.Strings(names)
	return names, nil
}

// DefaultProperty is the property the dashboard's property panel shows when
// its view names none, chosen from PropertyNames' answer: the first name
// ("" for none). The warm-up keeps that property's day partials, so the
// rule lives here, once (docs/dashboard.md).
func DefaultProperty(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return names[0]
}
