package storage

import (
	"database/sql"
)

// rawRead reads an events row's wire text (rawSQL) and received_at
// (receivedSQL). SQLite decodes them inside the statement with the Go
// functions registered in its driver; PostgreSQL cannot call Go, so there
// the row's stored columns are read and decoded here by the same code
// (README "On PostgreSQL"). Use: columns() in the select list, targets()
// in Scan, then decode().
type rawRead struct {
	pg bool
	// Raw and Received are the decoded values after decode; Raw is not
	// valid for a row without raw.
	Raw, Received sql.NullString
	stored        []byte
	fields        [7]sql.NullString
	column, ts    sql.NullString
}

func newRawRead(d dialect) *rawRead { return &rawRead{pg: d.name() == "postgres"} }

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
	var f rawFields
	for i, v := range r.fields {
		f[i] = v.String
	}
	var stored any
	switch {
	case len(r.stored) > 0 && r.stored[0] > rawFormatV3:
		// The wire text as is, which SQLite keeps as TEXT where the
		// compressed form cannot take it (encodeRaw).
		stored = string(r.stored)
	case r.stored != nil:
		stored = r.stored
	}
	raw, err := decodeRaw(stored, f)
	if err != nil {
		return err
	}
	r.Raw = sql.NullString{String: string(raw), Valid: raw != nil}
	received, err := receivedOf(r.column.String, stored, r.ts.String)
	if err != nil {
		return err
	}
	r.Received = sql.NullString{String: received, Valid: true}
	return nil
}
