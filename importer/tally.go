package importer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// Tally's own export (docs/query-api.md#export), NDJSON or CSV (told by the
// first byte: "{" is NDJSON), back in: every field as exported, the id and
// received_at included, so a site exported from one instance and
// imported into another exports the same bytes.

// tallyCSVColumns is the export's CSV header.
var tallyCSVColumns = []string{"id", "type", "url", "ts", "anon_id", "referrer", "country", "city", "browser", "os",
	"device_type", "user_id", "properties", "received_at"}

// tallyLine is one NDJSON line of the export.
type tallyLine struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	URL        *string         `json:"url"`
	TS         string          `json:"ts"`
	AnonID     string          `json:"anon_id"`
	Referrer   *string         `json:"referrer"`
	Country    *string         `json:"country"`
	City       *string         `json:"city"`
	Browser    *string         `json:"browser"`
	OS         *string         `json:"os"`
	DeviceType *string         `json:"device_type"`
	UserID     *string         `json:"user_id"`
	Properties json.RawMessage `json:"properties"`
	ReceivedAt string          `json:"received_at"`
}

func readTally(r io.Reader, _ *ContentIDs, emit func(Row) error, _ func()) error {
	br := bufio.NewReaderSize(r, 64<<10)
	b, _ := br.Peek(1)
	if len(b) == 1 && b[0] != '{' {
		return readTallyCSV(br, emit)
	}
	for line := 1; ; line++ {
		b, err := readLine(br)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if errors.Is(err, errLineTooLong) {
			return lineErr(line, "longer than %d MiB, the most a row can be", maxLine>>20)
		}
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		var l tallyLine
		if err := strictJSON(b, &l); err != nil {
			return lineErr(line, "not a line of Tally's NDJSON export: %v", err)
		}
		if err := emitChecked(line, l.row(), emit); err != nil {
			return err
		}
	}
}

func (l tallyLine) row() Row {
	val := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	props := l.Properties
	if bytes.Equal(props, []byte("null")) {
		props = nil
	}
	return Row{ID: l.ID, Type: l.Type, TS: l.TS, AnonID: l.AnonID, URL: l.URL, Referrer: l.Referrer, UserID: l.UserID,
		Properties: props, Country: val(l.Country), City: val(l.City), Browser: val(l.Browser), OS: val(l.OS),
		DeviceType: val(l.DeviceType), ReceivedAt: l.ReceivedAt}
}

func readTallyCSV(r io.Reader, emit func(Row) error) error {
	t, head, err := newCSVTable(r)
	if err != nil {
		return err
	}
	if strings.Join(head, ",") != strings.Join(tallyCSVColumns, ",") {
		return lineErr(1, "not Tally's CSV export: want the header %s", strings.Join(tallyCSVColumns, ","))
	}
	for {
		err := t.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		opt := func(name string) *string { return ptr(t.get(name)) }
		l := tallyLine{ID: t.get("id"), Type: t.get("type"), URL: opt("url"), TS: t.get("ts"), AnonID: t.get("anon_id"),
			Referrer: opt("referrer"), Country: opt("country"), City: opt("city"), Browser: opt("browser"), OS: opt("os"),
			DeviceType: opt("device_type"), UserID: opt("user_id"), ReceivedAt: t.get("received_at")}
		if p := t.get("properties"); p != "" {
			l.Properties = json.RawMessage(p)
		}
		if err := emitChecked(t.line(), l.row(), emit); err != nil {
			return err
		}
	}
}

// emitChecked checks what the stream's receiver would refuse, so a bad
// file is refused before anything is stored.
func emitChecked(line int, r Row, emit func(Row) error) error {
	if _, err := r.Event("check", "tally", timeNow()); err != nil {
		return lineErr(line, "%v", err)
	}
	return emit(r)
}
