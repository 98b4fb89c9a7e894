package storage

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tally-analytics/tally/fault"
)

// Saved segments of a site (docs/query-api.md#saved-segments), Plausible's: a
// name and a set of query API filters, which a query applies with the filter
// ["is", "segment", [id]] (query_segments.go expands it). The filters are
// stored as sent, in segment_data's v2 syntax, and checked by the query
// parser when written; a query parses them again, so a segment reads exactly
// as its filters written in the query would.

// Bounds of a segment, Plausible's.
const (
	// MaxSegmentsPerSite bounds a site's segments.
	MaxSegmentsPerSite = 500
	maxSegmentName     = 255
	// maxSegmentData bounds segment_data's JSON, compacted: each segment a
	// query names is expanded into its filters (10 at most, maxQuerySegments).
	maxSegmentData = 5 * 1024
)

// Segment types, Plausible's: a personal segment is listed to its owner
// only, a site segment to every reader of the site.
const (
	SegmentPersonal = "personal"
	SegmentSite     = "site"
)

// Segment is one saved segment of a site.
type Segment struct {
	ID     int64
	SiteID string
	Name   string
	Type   string
	// Data is segment_data, compact JSON: {"filters": [...]} and an
	// optional "labels" object.
	Data json.RawMessage
	// Owner is the actor that created the segment or changed it last, as
	// Plausible's owner is its last editor.
	Owner      Actor
	InsertedAt string
	UpdatedAt  string
}

// SegmentChange is a segment to create (every field set) or the fields of
// one to change (nil: left as it is).
type SegmentChange struct {
	Name *string
	Type *string
	Data json.RawMessage
}

func invalidSegment(format string, args ...any) error {
	return fault.Errorf(fault.InvalidSegment, format, args...)
}

// segmentName checks a segment's name: trimmed, 1 to 255 bytes.
func segmentName(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > maxSegmentName || !utf8.ValidString(s) {
		return "", invalidSegment("name must be a non-empty string of at most %d bytes", maxSegmentName)
	}
	return s, nil
}

func segmentType(s string) error {
	if s != SegmentPersonal && s != SegmentSite {
		return invalidSegment("type must be %q or %q", SegmentPersonal, SegmentSite)
	}
	return nil
}

// checkSegmentData validates segment_data as Plausible does (an object of
// filters, a non-empty array, and optional labels, an object or null; at
// most 5 KiB) and its filters as the query API parses them, and returns it
// compact. A segment may not name a segment: a query expands one level.
func checkSegmentData(raw json.RawMessage) (json.RawMessage, error) {
	var data map[string]json.RawMessage
	if json.Unmarshal(raw, &data) != nil || data == nil {
		return nil, invalidSegment("segment_data must be an object {\"filters\": [...], \"labels\": {...}}")
	}
	for k := range data {
		if k != "filters" && k != "labels" {
			return nil, invalidSegment("segment_data must not contain any other property except \"filters\" and \"labels\"")
		}
	}
	var filters []json.RawMessage
	if json.Unmarshal(data["filters"], &filters) != nil || len(filters) == 0 {
		return nil, invalidSegment("segment_data: property \"filters\" must be an array with at least one member")
	}
	if l, ok := data["labels"]; ok && string(l) != "null" {
		var labels map[string]json.RawMessage
		if json.Unmarshal(l, &labels) != nil || labels == nil {
			return nil, invalidSegment("segment_data: property \"labels\" must be an object or null")
		}
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, invalidSegment("segment_data must be JSON")
	}
	if compact.Len() > maxSegmentData {
		return nil, invalidSegment("segment_data should be at most %d byte(s) of JSON, not %d", maxSegmentData, compact.Len())
	}
	var ids []int64
	if err := listSegmentRefs(data["filters"], &ids); err != nil || len(ids) > 0 {
		return nil, invalidSegment("segment_data: a segment's filters may not name a segment")
	}
	pq := &parsedQuery{loc: time.UTC}
	if err := pq.parseFilters(data["filters"]); err != nil {
		if e := fault.As(err); e != nil {
			return nil, invalidSegment("segment_data: %s", e.Message)
		}
		return nil, err
	}
	return compact.Bytes(), nil
}

// check validates c as a segment to create.
func (c SegmentChange) check() (Segment, error) {
	var s Segment
	var err error
	if c.Name == nil {
		return s, invalidSegment("name is required")
	}
	if s.Name, err = segmentName(*c.Name); err != nil {
		return s, err
	}
	if c.Type == nil {
		return s, invalidSegment("type is required: %q or %q", SegmentPersonal, SegmentSite)
	}
	if s.Type = *c.Type; segmentType(s.Type) != nil {
		return s, segmentType(s.Type)
	}
	if c.Data == nil {
		return s, invalidSegment("segment_data is required: {\"filters\": [...]}")
	}
	s.Data, err = checkSegmentData(c.Data)
	return s, err
}

// segmentMeta is a segment as its audit rows record it: not its filters,
// whose values may be personal.
func segmentMeta(s Segment) map[string]any {
	return map[string]any{"segment_id": s.ID, "name": s.Name, "type": s.Type}
}

// ownerID is the owner_id column of an actor: NULL for the admin token.
func ownerID(a Actor) any {
	if a.ID == "" {
		return nil
	}
	return a.ID
}

// CreateSegment stores a segment of site, owned by actor, and audits it
// (segment.create).
func (db *DB) CreateSegment(ctx context.Context, actor Actor, site *Site, c SegmentChange) (*Segment, error) {
	s, err := c.check()
	if err != nil {
		return nil, err
	}
	s.SiteID, s.Owner = site.ID, actor
	s.InsertedAt = FormatTime(db.now())
	s.UpdatedAt = s.InsertedAt
	err = db.writer.do(ctx, func(tx *writeTx) error {
		if err := db.checkSite(site); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(`SELECT COUNT(*) FROM segments WHERE site_id = ?`, site.ID).Scan(&n); err != nil {
			return err
		}
		if n >= MaxSegmentsPerSite {
			return fault.Errorf(fault.SegmentLimitReached, "a site may have at most %d segments; delete one first", MaxSegmentsPerSite)
		}
		if err := tx.QueryRow(`INSERT INTO segments(site_id, name, type, segment_data, owner_kind, owner_id, inserted_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`, site.ID, s.Name, s.Type, string(s.Data),
			actor.Kind, ownerID(actor), s.InsertedAt, s.UpdatedAt).Scan(&s.ID); err != nil {
			return err
		}
		return db.audit(tx, site.WorkspaceID, actor, "segment.create", site.ID, segmentMeta(s))
	})
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// segmentsSQL reads segments; a WHERE follows.
const segmentsSQL = `SELECT id, site_id, name, type, segment_data, owner_kind, COALESCE(owner_id, ''),
	inserted_at, updated_at FROM segments `

// scanSegments reads segmentsSQL's rows and closes them.
func scanSegments(rows *sql.Rows) ([]Segment, error) {
	defer rows.Close()
	list := []Segment{}
	for rows.Next() {
		var s Segment
		var data string
		if err := rows.Scan(&s.ID, &s.SiteID, &s.Name, &s.Type, &data, &s.Owner.Kind, &s.Owner.ID,
			&s.InsertedAt, &s.UpdatedAt); err != nil {
			return nil, err
		}
		s.Data = json.RawMessage(data)
		list = append(list, s)
	}
	return list, rows.Err()
}

// Segments lists the segments of site that viewer sees, as Plausible lists
// them: the site segments and viewer's own personal ones, the last updated
// first.
func (db *DB) Segments(ctx context.Context, site string, viewer Actor) ([]Segment, error) {
	rows, err := db.read.QueryContext(ctx, segmentsSQL+`WHERE site_id = ?
		AND (type = 'site' OR (owner_kind = ? AND COALESCE(owner_id, '') = ?))
		ORDER BY updated_at DESC, id DESC`, site, viewer.Kind, viewer.ID)
	if err != nil {
		return nil, err
	}
	return scanSegments(rows)
}

var errNoSegment = fault.Errorf(fault.NotFound, "no segment with that id on this site")

// SegmentOf reads segment id of site: any of the site's, personal or not, as
// Plausible reads one by id; one of another site, or none, is not_found.
func (db *DB) SegmentOf(ctx context.Context, site string, id int64) (*Segment, error) {
	rows, err := db.read.QueryContext(ctx, segmentsSQL+`WHERE id = ? AND site_id = ?`, id, site)
	if err != nil {
		return nil, err
	}
	list, err := scanSegments(rows)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, errNoSegment
	}
	return &list[0], nil
}

// UpdateSegment changes the fields c sets of segment id of site, makes actor
// its owner (Plausible's last editor) and audits it (segment.update: the
// fields changed, and the previous name when it changed).
func (db *DB) UpdateSegment(ctx context.Context, actor Actor, site *Site, id int64, c SegmentChange) (*Segment, error) {
	if c.Name == nil && c.Type == nil && c.Data == nil {
		return nil, invalidSegment("nothing to change: send name, type or segment_data")
	}
	var name string
	var data json.RawMessage
	var err error
	if c.Name != nil {
		if name, err = segmentName(*c.Name); err != nil {
			return nil, err
		}
	}
	if c.Type != nil {
		if err := segmentType(*c.Type); err != nil {
			return nil, err
		}
	}
	if c.Data != nil {
		if data, err = checkSegmentData(c.Data); err != nil {
			return nil, err
		}
	}
	var s Segment
	err = db.writer.do(ctx, func(tx *writeTx) error {
		if err := db.checkSite(site); err != nil {
			return err
		}
		rows, err := tx.Query(segmentsSQL+`WHERE id = ? AND site_id = ?`, id, site.ID)
		if err != nil {
			return err
		}
		list, err := scanSegments(rows)
		if err != nil {
			return err
		}
		if len(list) == 0 {
			return errNoSegment
		}
		s = list[0]
		meta := map[string]any{}
		var changed []string
		if c.Name != nil {
			changed = append(changed, "name")
			if name != s.Name {
				meta["previous_name"] = s.Name
			}
			s.Name = name
		}
		if c.Type != nil {
			changed = append(changed, "type")
			if *c.Type != s.Type {
				meta["previous_type"] = s.Type
			}
			s.Type = *c.Type
		}
		if c.Data != nil {
			changed = append(changed, "segment_data")
			s.Data = data
		}
		s.Owner, s.UpdatedAt = actor, FormatTime(db.now())
		if _, err := tx.Exec(`UPDATE segments SET name = ?, type = ?, segment_data = ?, owner_kind = ?, owner_id = ?,
			updated_at = ? WHERE id = ?`, s.Name, s.Type, string(s.Data), actor.Kind, ownerID(actor), s.UpdatedAt, id); err != nil {
			return err
		}
		for k, v := range segmentMeta(s) {
			meta[k] = v
		}
		meta["changed"] = changed
		return db.audit(tx, site.WorkspaceID, actor, "segment.update", site.ID, meta)
	})
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// DeleteSegment deletes segment id of site and audits it (segment.delete);
// one of another site, or none, is not_found. A query naming it afterwards
// is a 400, as for any unknown segment.
func (db *DB) DeleteSegment(ctx context.Context, actor Actor, site *Site, id int64) error {
	return db.writer.do(ctx, func(tx *writeTx) error {
		if err := db.checkSite(site); err != nil {
			return err
		}
		s := Segment{ID: id}
		err := tx.QueryRow(`SELECT name, type FROM segments WHERE id = ? AND site_id = ?`, id, site.ID).Scan(&s.Name, &s.Type)
		if errors.Is(err, sql.ErrNoRows) {
			return errNoSegment
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(`DELETE FROM segments WHERE id = ?`, id); err != nil {
			return err
		}
		return db.audit(tx, site.WorkspaceID, actor, "segment.delete", site.ID, segmentMeta(s))
	})
}
