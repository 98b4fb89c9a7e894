// Package importer brings another product's history into a site
// (docs/import.md): GoatCounter's CSV export, Umami's CSV export or its
// database, and Tally's own export.
//
// Importing means turning each row of the source into one of our events
// (a Row) and storing it as intake stores a late event, through the
// writer, so sessions, visits, rollups, day partials and the report cache
// come out as if the events had been sent at the time. Rows are stored in
// chunks of storage.ImportChunk, each one writer job, so intake waits for
// at most one chunk at a time.
//
// Idempotency: every row gets a deterministic id, the source's own id where
// it has one (derived with the source's name, so two products cannot
// collide) or else a hash of the row's content and how many identical
// rows came before it. The site keeps the ids it imported for good
// (storage.ImportEvents), so running an import again, whole or after a
// failure halfway, stores only what is missing.
//
// How rows reach the service: the rows of one import are one stream (a
// Header line, Row lines, a Trailer line, as NDJSON) that Apply stores. A
// running service takes the stream at POST /v1/sites/:siteId/imports of
// its query API, so its own writer stores it and its caches stay right;
// with the service stopped, `tally import` opens the database file itself
// and runs Apply in its own process, after making sure no other process
// has the file open. Either way the import ends with one audit entry
// (site.import) naming the source, the files and the counts.
package importer

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// Row is one event of an import as the stream carries it: the columns of
// an event (docs/query-api.md#export names the same fields) and its properties.
type Row struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	TS         string          `json:"ts"`
	AnonID     string          `json:"anon_id"`
	URL        *string         `json:"url,omitempty"`
	Referrer   *string         `json:"referrer,omitempty"`
	UserID     *string         `json:"user_id,omitempty"`
	Properties json.RawMessage `json:"properties,omitempty"`
	Country    string          `json:"country,omitempty"`
	City       string          `json:"city,omitempty"`
	Browser    string          `json:"browser,omitempty"`
	OS         string          `json:"os,omitempty"`
	DeviceType string          `json:"device_type,omitempty"`
	// ReceivedAt is kept from a Tally export; other sources leave it empty
	// and the event is received when it is stored.
	ReceivedAt string `json:"received_at,omitempty"`
}

// Header is the first line of an import stream.
type Header struct {
	Source string   `json:"source"`
	Files  []string `json:"files"`
}

// Trailer is the last line of an import stream: how many rows the sender
// read and sent, and how many it left out (bots). A stream without it was
// cut short and is not audited as an import.
type Trailer struct {
	End struct {
		Rows    int64 `json:"rows"`
		Skipped int64 `json:"skipped"`
	} `json:"end"`
}

// Sources are the names of the sources whose rows a stream may carry.
var Sources = []string{"goatcounter", "umami", "tally"}

var typePattern = regexp.MustCompile(`^[A-Za-z0-9_.:$-]{1,64}$`)

// Counts is how far an import got.
type Counts struct {
	Rows, Imported, Duplicates int64
}

// Apply stores the import stream r in site, a chunk of storage.ImportChunk
// rows per writer job, and records the import in the audit log once the
// trailer arrives. progress, when set, is called after every chunk. A bad
// line is a fault.InvalidImport naming it; the chunks before it stay
// stored, and running the import again completes it.
func Apply(ctx context.Context, db *storage.DB, site *storage.Site, actor storage.Actor, r io.Reader, progress func(Counts)) (storage.ImportSummary, error) {
	start := time.Now()
	var sum storage.ImportSummary
	br := bufio.NewReaderSize(r, 64<<10)
	line := 0
	next := func() ([]byte, error) {
		for {
			b, err := readLine(br)
			if err != nil {
				return nil, err
			}
			line++
			if len(bytes.TrimSpace(b)) > 0 {
				return b, nil
			}
		}
	}
	bad := func(format string, args ...any) error {
		return fault.Errorf(fault.InvalidImport, "line %d: %s", line, clip(fmt.Sprintf(format, args...)))
	}
	b, err := next()
	if errors.Is(err, io.EOF) {
		return sum, fault.Errorf(fault.InvalidImport, "the import is empty: want a header line first")
	}
	if err != nil {
		return sum, streamErr(err, line+1)
	}
	var h Header
	if err := strictJSON(b, &h); err != nil || !knownSource(h.Source) {
		return sum, bad("want a header {\"source\": one of %s, \"files\": [...]}", strings.Join(Sources, ", "))
	}
	sum.Source, sum.Files = h.Source, h.Files
	chunk := make([]storage.IngestEvent, 0, storage.ImportChunk)
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		res, err := db.ImportEvents(ctx, chunk)
		if err != nil {
			return err
		}
		sum.Imported += int64(res.Accepted)
		sum.Duplicates += int64(len(chunk) - res.Accepted)
		chunk = chunk[:0]
		if progress != nil {
			progress(Counts{Rows: sum.Rows, Imported: sum.Imported, Duplicates: sum.Duplicates})
		}
		return nil
	}
	now := db.Clock()
	for {
		b, err := next()
		if errors.Is(err, io.EOF) {
			if ferr := flush(); ferr != nil {
				return sum, ferr
			}
			return sum, fault.Errorf(fault.InvalidImport, "the import ended after %d rows without its end line (cut short?); the rows sent are stored, run it again to complete it", sum.Rows)
		}
		if err != nil {
			return sum, streamErr(err, line+1)
		}
		if bytes.HasPrefix(bytes.TrimSpace(b), []byte(`{"end"`)) {
			var t Trailer
			if err := strictJSON(b, &t); err != nil {
				return sum, bad("a bad end line: %v", err)
			}
			if t.End.Rows != sum.Rows {
				return sum, bad("the end line counts %d rows, the import holds %d", t.End.Rows, sum.Rows)
			}
			if err := flush(); err != nil {
				return sum, err
			}
			sum.Skipped = t.End.Skipped
			sum.Took = time.Since(start)
			if err := db.RecordImport(ctx, actor, site, sum); err != nil {
				return sum, err
			}
			return sum, nil
		}
		var row Row
		if err := strictJSON(b, &row); err != nil {
			return sum, bad("not a row: %v", err)
		}
		e, err := row.Event(site.ID, h.Source, now)
		if err != nil {
			return sum, bad("%v", err)
		}
		sum.Rows++
		chunk = append(chunk, e)
		if len(chunk) == storage.ImportChunk {
			if err := flush(); err != nil {
				return sum, err
			}
		}
	}
}

func knownSource(s string) bool {
	for _, k := range Sources {
		if s == k {
			return true
		}
	}
	return false
}

// readLine reads one line, without its end, refusing one over maxLine.
func readLine(br *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		part, err := br.ReadSlice('\n')
		out = append(out, part...)
		if len(out) > maxLine {
			return nil, errLineTooLong
		}
		switch {
		case err == nil:
			return bytes.TrimRight(out, "\r\n"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(out) > 0:
			return out, nil
		default:
			return nil, err
		}
	}
}

func streamErr(err error, line int) error {
	if errors.Is(err, errLineTooLong) {
		return fault.Errorf(fault.InvalidImport, "line %d: longer than %d MiB, the most a row can be", line, maxLine>>20)
	}
	// The sender went away or stalled: what came before is stored, and
	// running the import again completes it.
	return fault.Errorf(fault.InvalidImport, "line %d: the import could not be read to its end (%s); the rows before it are stored, run it again to complete it", line, clip(err.Error()))
}

// strictJSON decodes one JSON value into v, refusing unknown fields and
// anything after it.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value on the line")
	}
	return nil
}

// rawEvent is the payload an imported event keeps in events.raw: its
// fields as our intake's envelope names them, and context.import naming
// the source, which marks it as imported (docs/import.md).
type rawEvent struct {
	ID         string          `json:"id"`
	SiteID     string          `json:"site_id"`
	Type       string          `json:"type"`
	AnonID     string          `json:"anon_id"`
	TS         string          `json:"ts"`
	URL        *string         `json:"url,omitempty"`
	Referrer   *string         `json:"referrer,omitempty"`
	UserID     *string         `json:"user_id,omitempty"`
	Properties json.RawMessage `json:"properties,omitempty"`
	Context    struct {
		Import string `json:"import"`
	} `json:"context"`
}

// maxFuture is how far ahead of now an event may be dated, as at intake.
const maxFuture = 24 * time.Hour

// Event checks the row and makes the event stored for site; now bounds
// its time as intake does.
func (r Row) Event(site, source string, now time.Time) (storage.IngestEvent, error) {
	var e storage.IngestEvent
	switch {
	case r.ID == "" || len(r.ID) > 256 || !utf8.ValidString(r.ID):
		return e, errors.New("id: want 1 to 256 characters")
	case !typePattern.MatchString(r.Type):
		return e, fmt.Errorf("type: want ^[A-Za-z0-9_.:$-]{1,64}$, got %s", quote(r.Type))
	case r.AnonID == "" || utf8.RuneCountInString(r.AnonID) > 128:
		return e, errors.New("anon_id: want 1 to 128 characters")
	case r.UserID != nil && (*r.UserID == "" || utf8.RuneCountInString(*r.UserID) > 256):
		return e, errors.New("user_id: want 1 to 256 characters")
	case r.Country != "" && !validCountry(r.Country):
		return e, fmt.Errorf("country: want two capital letters, got %s", quote(r.Country))
	}
	ts, err := time.Parse(time.RFC3339Nano, r.TS)
	if err != nil {
		return e, fmt.Errorf("ts: want an ISO 8601 time, got %s", quote(r.TS))
	}
	if ts.After(now.Add(maxFuture)) {
		return e, fmt.Errorf("ts: %s is more than 24 hours ahead", quote(r.TS))
	}
	var received time.Time
	if r.ReceivedAt != "" {
		if received, err = time.Parse(time.RFC3339Nano, r.ReceivedAt); err != nil {
			return e, fmt.Errorf("received_at: want an ISO 8601 time, got %s", quote(r.ReceivedAt))
		}
	}
	props := r.Properties
	if len(props) > 0 && (bytes.Equal(props, []byte("null")) || props[0] != '{') {
		if !bytes.Equal(props, []byte("null")) {
			return e, errors.New("properties: want an object")
		}
		props = nil
	}
	raw := rawEvent{ID: r.ID, SiteID: site, Type: r.Type, AnonID: r.AnonID, TS: storage.FormatTime(ts),
		URL: r.URL, Referrer: r.Referrer, UserID: r.UserID, Properties: props}
	raw.Context.Import = source
	b, err := json.Marshal(raw)
	if err != nil {
		return e, fmt.Errorf("properties: %v", err)
	}
	return storage.IngestEvent{ID: r.ID, SiteID: site, Type: r.Type, AnonID: r.AnonID, UserID: r.UserID,
		URL: r.URL, Referrer: r.Referrer, TS: ts.UTC(), Raw: b, Country: r.Country, City: r.City,
		Browser: r.Browser, OS: r.OS, DeviceType: r.DeviceType, Credential: "import:" + source,
		ReceivedAt: received.UTC()}, nil
}

func validCountry(c string) bool {
	return len(c) == 2 && c[0] >= 'A' && c[0] <= 'Z' && c[1] >= 'A' && c[1] <= 'Z'
}

// idSpace is the UUID namespace of imported ids (a version 5 UUID of our
// own): an id is the SHA-1 UUID of the source's name and the row's key.
var idSpace = uuid.MustParse("6f1c7f0e-2b1a-5c47-9d0e-7a11e5a1b0c1")

// SourceID is the id of the row of source whose own id is key.
func SourceID(source, key string) string {
	return uuid.NewSHA1(idSpace, []byte(source+"\x00"+key)).String()
}

// ContentIDs gives rows without an id of their own one: a hash of the
// row's fields, and the count of identical rows before it in the import
// (two hits of one visitor on one page in the same second are two
// pageviews), so the same files give the same ids in any run.
type ContentIDs struct {
	seen map[[32]byte]int
}

// ID returns the id of the next row of source with these fields.
func (c *ContentIDs) ID(source string, fields ...string) string {
	if c.seen == nil {
		c.seen = map[[32]byte]int{}
	}
	h := sha256.Sum256([]byte(strings.Join(fields, "\x00")))
	n := c.seen[h]
	c.seen[h] = n + 1
	return SourceID(source, fmt.Sprintf("%x/%d", h[:16], n))
}

// eventType is an event name as our type: the name where it is one,
// else its characters outside the type's alphabet replaced with _ and cut
// to 64 (the name itself is kept in the properties, as "name").
func eventType(name string) (string, bool) {
	if typePattern.MatchString(name) {
		return name, true
	}
	var b strings.Builder
	for _, r := range name {
		if b.Len() >= 64 {
			break
		}
		if r < 128 && typePattern.MatchString(string(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "event", false
	}
	return b.String(), false
}

// timeNow is the clock rows are checked against while a file is read.
var timeNow = time.Now
