package storage

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/tally-analytics/tally/fault"
)

// ExportEvent is one event as the event export writes it
// (docs/query-api.md#export): the timeline's columns, the user id, when it was
// received, and the properties object of its wire payload.
type ExportEvent struct {
	ID, Type, TS, AnonID, ReceivedAt                              string
	URL, Referrer, UserID, Country, City, Browser, OS, DeviceType *string
	// Properties is the compact JSON object of the payload's properties,
	// nil when it has none.
	Properties json.RawMessage
}

// The bounds of one page of an export: it ends after ExportPageRows rows
// or once its payloads reach ExportPageBytes, so a page of events that
// each hold a large payload stays small too.
const (
	ExportPageRows  = 500
	ExportPageBytes = 4 << 20
)

// exportReceivedSlack is how long before an export's first day its rows
// may have been received: an event's ts is at most 24 hours ahead of its
// receive time (docs/intake.md), plus an hour for rows committed out of
// receive order (a request waits in the writer's queue) or a clock that
// stepped back.
const exportReceivedSlack = 25 * time.Hour

// ExportEvents calls page with the site's events whose ts lies in [from,
// until), in arrival order, in pages of at most ExportPageRows rows and
// about ExportPageBytes of payload. Each page is read in its own short
// read transaction, so a slow consumer holds no snapshot (the WAL can
// start over meanwhile); the export covers the events stored when it
// began, less those erased or purged before their page is read. It starts
// at the first row received exportReceivedSlack before from: the rows
// before it cannot hold such a ts. An error of page ends the export with it.
//
// The export lasts as long as its range and its client take, so it has no
// deadline of its own; each of its reads has pageTimeout (0: none), past
// which it ends with a query_timeout fault.
func (db *DB) ExportEvents(ctx context.Context, site string, from, until time.Time, pageTimeout time.Duration, page func([]ExportEvent) error) error {
	var last, cursor int64
	err := withReadTimeout(ctx, pageTimeout, func(ctx context.Context) error {
		if err := db.read.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events`).Scan(&last); err != nil {
			return err
		}
		var err error
		cursor, err = db.firstReceived(ctx, from.Add(-exportReceivedSlack), last)
		return err
	})
	if err != nil {
		return err
	}
	lo, hi := FormatTime(from), FormatTime(until)
	for cursor < last {
		var list []ExportEvent
		var next int64
		err := withReadTimeout(ctx, pageTimeout, func(ctx context.Context) error {
			var err error
			list, next, err = db.exportPage(ctx, site, lo, hi, cursor, last)
			return err
		})
		if err != nil {
			return err
		}
		if len(list) > 0 {
			if err := page(list); err != nil {
				return err
			}
		}
		cursor = next
	}
	return nil
}

// withReadTimeout runs read with ctx ending after timeout (0: ctx as it
// is); a read that fails because that deadline passed is a query_timeout
// fault, whatever error the driver made of it.
func withReadTimeout(ctx context.Context, timeout time.Duration, read func(context.Context) error) error {
	if timeout <= 0 {
		return read(ctx)
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := read(rctx)
	if err != nil && ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded) {
		return fault.Errorf(fault.QueryTimeout, "a read of the export took longer than its limit of %s and was stopped: ask for a shorter range", timeout)
	}
	return err
}

// firstReceived finds, by bisection over seq (events is in arrival order),
// where the rows received at or after at begin: the seq before the first
// such row, as an exclusive cursor, at most last.
func (db *DB) firstReceived(ctx context.Context, at time.Time, last int64) (int64, error) {
	cut := FormatTime(at)
	lo, hi := int64(0), last+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		var seq int64
		rr := newRawRead(db.d)
		err := db.read.QueryRowContext(ctx, `SELECT seq, `+rr.receivedColumns()+` FROM events WHERE seq >= ? AND seq <= ? ORDER BY seq LIMIT 1`,
			mid, last).Scan(append([]any{&seq}, rr.receivedTargets()...)...)
		if err == nil {
			err = rr.receivedDecode()
		}
		received := rr.Received.String
		switch {
		case errors.Is(err, sql.ErrNoRows), err == nil && received >= cut:
			hi = mid
		case err != nil:
			return 0, err
		default:
			lo = seq + 1
		}
	}
	return max(lo-1, 0), nil
}

// exportPage reads the site's rows after cursor, at most last, whose ts
// lies in [lo, hi): one page, and the cursor after the rows it looked at
// (last once none are left).
func (db *DB) exportPage(ctx context.Context, site, lo, hi string, cursor, last int64) ([]ExportEvent, int64, error) {
	// +site_id keeps SQLite off the (site_id, anon_id, ts) index, which
	// would read all of the site's rows and sort them for every page.
	rr := newRawRead(db.d)
	rows, err := db.read.QueryContext(ctx, `SELECT seq, id, type, url, ts, anon_id, user_id, referrer, country, city, browser, os, device_type,
		`+rr.columns()+` FROM events
		WHERE seq > ? AND seq <= ? AND `+db.d.NoIndex("site_id")+` = ? AND ts >= ? AND ts < ? ORDER BY seq LIMIT ?`,
		cursor, last, site, lo, hi, ExportPageRows)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var list []ExportEvent
	bytesRead := 0
	for rows.Next() {
		var e ExportEvent
		if err := rows.Scan(append([]any{&cursor, &e.ID, &e.Type, &e.URL, &e.TS, &e.AnonID, &e.UserID, &e.Referrer, &e.Country, &e.City,
			&e.Browser, &e.OS, &e.DeviceType}, rr.targets()...)...); err != nil {
			return nil, 0, err
		}
		if err := rr.decode(); err != nil {
			return nil, 0, err
		}
		raw := []byte(rr.Raw.String)
		e.ReceivedAt = rr.Received.String
		e.Properties = propertiesOf(raw)
		list = append(list, e)
		if bytesRead += len(raw); bytesRead >= ExportPageBytes {
			return list, cursor, rows.Err()
		}
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	if len(list) < ExportPageRows {
		// The query looked at every row up to last.
		return list, last, nil
	}
	return list, cursor, nil
}

// propertiesOf is the compact properties object of a wire payload, nil
// when it has none (every intake format names it properties).
func propertiesOf(raw []byte) json.RawMessage {
	var p struct {
		Properties json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(raw, &p) != nil || len(p.Properties) == 0 || p.Properties[0] != '{' {
		return nil
	}
	var b bytes.Buffer
	if json.Compact(&b, p.Properties) != nil {
		return nil
	}
	return b.Bytes()
}
