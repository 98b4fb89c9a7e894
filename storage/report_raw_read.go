package storage

import (
	"context"
	"database/sql"
)

// rawRead reads an events row's wire text (rawSQL) and received_at
// (receivedSQL). SQLite decodes them inside the statement with the Go
// functions registered in its driver; PostgreSQL cannot call Go, so there
// the row's stored columns are read and decoded here by the same code
// (docs/postgresql.md#on-postgresql). Use: columns() in the select list,
// targets() in Scan, then decode().
type rawRead struct {
	pg bool
	// Raw and Received are the decoded values after decode; Raw is not
	// valid for a row without raw.
	Raw, Received sql.NullString
	stored        []byte
	fields        [7]sql.NullString
	column, ts    sql.NullString
}

func newRawRead(d dialect) *rawRead { return &rawRead{pg: d.Name() == "postgres"} }

// columns is the select list: the raw text, then the received_at text.
func (r *rawRead) columns() string {
	if !r.pg {
		return rawSQL + ", " + receivedSQL
	}
	return "raw, id, site_id, type, anon_id, user_id, url, referrer, received_at, ts"
}

// targets are the Scan destinations of columns.
func (r *rawRead) targets() []any {
	if !r.pg {
		return []any{&r.Raw, &r.Received}
	}
	t := []any{&r.stored}
	for i := range r.fields {
		t = append(t, &r.fields[i])
	}
	return append(t, &r.column, &r.ts)
}

// decode sets Raw and Received from a scanned row.
func (r *rawRead) decode() error {
	if !r.pg {
		return nil
	}
	stored, err := r.decodeRaw()
	if err != nil {
		return err
	}
	received, err := receivedOf(r.column.String, stored, r.ts.String)
	if err != nil {
		return err
	}
	r.Received = sql.NullString{String: received, Valid: true}
	return nil
}

// rawWhen is a select list that gives the wire text of the rows where cond
// holds, NULL elsewhere (no received time). Use with rawTargets and
// rawDecode. On PostgreSQL only those rows' stored raw is read.
func (r *rawRead) rawWhen(cond string) string {
	if !r.pg {
		return "CASE WHEN " + cond + " THEN " + rawSQL + " END"
	}
	return "CASE WHEN " + cond + " THEN raw END, id, site_id, type, anon_id, user_id, url, referrer"
}

// rawTargets are the Scan destinations of rawWhen.
func (r *rawRead) rawTargets() []any {
	if !r.pg {
		return []any{&r.Raw}
	}
	return r.targets()[:1+len(r.fields)]
}

// rawDecode sets Raw from a row scanned with rawTargets.
func (r *rawRead) rawDecode() error {
	if !r.pg {
		return nil
	}
	_, err := r.decodeRaw()
	return err
}

// receivedColumns is a select list of the row's received_at text alone.
// Use with receivedTargets and receivedDecode.
func (r *rawRead) receivedColumns() string {
	if !r.pg {
		return receivedSQL
	}
	return "received_at, raw, ts"
}

// receivedTargets are the Scan destinations of receivedColumns.
func (r *rawRead) receivedTargets() []any {
	if !r.pg {
		return []any{&r.Received}
	}
	return []any{&r.column, &r.stored, &r.ts}
}

// receivedDecode sets Received from a row scanned with receivedTargets.
func (r *rawRead) receivedDecode() error {
	if !r.pg {
		return nil
	}
	received, err := receivedOf(r.column.String, r.storedValue(), r.ts.String)
	if err != nil {
		return err
	}
	r.Received = sql.NullString{String: received, Valid: true}
	return nil
}

// storedValue is the scanned stored raw as SQLite's functions see it.
func (r *rawRead) storedValue() any {
	if r.stored == nil {
		return nil
	}
	return storedForm(r.stored)
}

// decodeRaw sets Raw from the scanned stored raw and fields (PostgreSQL)
// and returns the stored value as SQLite's function would see it.
func (r *rawRead) decodeRaw() (any, error) {
	var f rawFields
	for i, v := range r.fields {
		f[i] = v.String
	}
	stored := r.storedValue()
	raw, err := decodeRaw(stored, f)
	if err != nil {
		return nil, err
	}
	r.Raw = sql.NullString{String: string(raw), Valid: raw != nil}
	return stored, nil
}

// EventRecord is one events row as intake stored it: its columns, its wire
// text exactly as received and the credential that sent it. Tests and dev
// tools read it to check what was stored, the same way on both backends.
type EventRecord struct {
	Seq                                                           int64
	ID, SiteID, Type, AnonID, TS                                  string
	UserID, URL, Referrer, Country, City, Browser, OS, DeviceType sql.NullString
	// Raw is the wire text (not valid for a row stored without one).
	Raw        sql.NullString
	ReceivedAt string
	// Credential is the credential's text (event_credentials), not valid
	// for an event sent without one.
	Credential sql.NullString
}

// EventRecords returns the stored events of site, or of every site when
// site is empty, in arrival order. The wire text is decoded by the code
// SQLite's event_raw runs (rawRead), so both backends give the same bytes.
func (db *DB) EventRecords(ctx context.Context, site string) ([]EventRecord, error) {
	rr := newRawRead(db.d)
	q := `SELECT seq, id, site_id, type, anon_id, ts, user_id, url, referrer, country, city, browser, os, device_type,
		(SELECT c.credential FROM event_credentials c WHERE c.seq = events.seq), ` + rr.columns() + ` FROM events`
	var args []any
	if site != "" {
		q += ` WHERE site_id = ?`
		args = append(args, site)
	}
	rows, err := db.read.QueryContext(ctx, q+` ORDER BY seq`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []EventRecord
	for rows.Next() {
		var e EventRecord
		if err := rows.Scan(append([]any{&e.Seq, &e.ID, &e.SiteID, &e.Type, &e.AnonID, &e.TS, &e.UserID, &e.URL, &e.Referrer,
			&e.Country, &e.City, &e.Browser, &e.OS, &e.DeviceType, &e.Credential}, rr.targets()...)...); err != nil {
			return nil, err
		}
		if err := rr.decode(); err != nil {
			return nil, err
		}
		e.Raw, e.ReceivedAt = rr.Raw, rr.Received.String
		out = append(out, e)
	}
	return out, rows.Err()
}
