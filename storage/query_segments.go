package storage

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// Saved segments in a query (docs/query-api.md#saved-segments): a filter
// ["is", "segment", [id, ...]] is replaced by the segments' stored filters
// before the query is parsed, as Plausible resolves them, so the parser,
// the day partials and the report cache see only ordinary filters (a
// segment changed is another set of filters, another cache key), and the
// answer's query.filters shows them expanded, as Plausible's does.

// maxQuerySegments bounds the segment ids a query names, repeats counted,
// Plausible's.
const maxQuerySegments = 10

// SegmentDimension is the filter key of a saved segment.
const SegmentDimension = "segment"

// listSegmentRefs appends to ids the ids of the segment filters of raw, a
// list of filters (segmentRefs); what is not a list is left to the parser.
func listSegmentRefs(raw json.RawMessage, ids *[]int64) error {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return nil
	}
	for _, f := range list {
		if err := segmentRefs(f, 1, ids); err != nil {
			return err
		}
	}
	return nil
}

// segmentRefs appends to ids the ids of every segment filter in the filter
// tree raw, repeats kept; a segment filter that is not ["is", "segment",
// [whole numbers]] is invalid_query. What is not a filter tree is left to
// the parser, which refuses it.
func segmentRefs(raw json.RawMessage, depth int, ids *[]int64) error {
	var parts []json.RawMessage
	var op string
	if depth > maxFilterDepth || json.Unmarshal(raw, &parts) != nil || len(parts) < 2 || json.Unmarshal(parts[0], &op) != nil {
		return nil // the parser refuses it
	}
	switch op {
	case "and", "or":
		var children []json.RawMessage
		if json.Unmarshal(parts[1], &children) != nil {
			return nil
		}
		for _, c := range children {
			if err := segmentRefs(c, depth+1, ids); err != nil {
				return err
			}
		}
		return nil
	case "not", "has_done", "has_not_done":
		return segmentRefs(parts[1], depth+1, ids)
	}
	var dim string
	if json.Unmarshal(parts[1], &dim) != nil || dim != SegmentDimension {
		return nil
	}
	if op != "is" || len(parts) != 3 {
		return invalidQuery("invalid filter %s: a segment filter is [\"is\", \"segment\", [segment ids]] (exclude a segment with [\"not\", [\"is\", \"segment\", [id]]])", clip(raw))
	}
	var values []json.RawMessage
	if json.Unmarshal(parts[2], &values) != nil || len(values) == 0 {
		return invalidQuery("invalid filter %s: a segment filter lists one or more segment ids, whole numbers", clip(raw))
	}
	for _, v := range values {
		id, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || id <= 0 {
			// Plausible's message for ids given as strings.
			return invalidQuery("Invalid filter '%s': segment ids are whole numbers, such as [\"is\", \"segment\", [12]]", clip(raw))
		}
		*ids = append(*ids, id)
	}
	return nil
}

// resolveSegments returns the filters raw with each segment filter replaced
// by the stored filters of its segments of site, as Plausible resolves them:
// one id by ["and", its filters], several by ["or", [["and", the first's],
// ...]]; then, as Plausible does, the query's top-level "and" filters are
// spread into the list. Without segment filters raw is returned as it is.
func (db *DB) resolveSegments(ctx context.Context, site string, raw json.RawMessage) (json.RawMessage, error) {
	if raw == nil {
		return raw, nil
	}
	// Walked every time (not only when the text holds "segment": JSON may
	// escape its letters), a few microseconds beside the query's reads.
	var ids []int64
	if err := listSegmentRefs(raw, &ids); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return raw, nil
	}
	if len(ids) > maxQuerySegments {
		return nil, invalidQuery("Invalid filters. You can only use up to %d segment filters in a query.", maxQuerySegments)
	}
	byID, err := db.segmentFilters(ctx, site, ids)
	if err != nil {
		return nil, err
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return raw, nil
	}
	var out []json.RawMessage
	for _, f := range list {
		f, err := expandSegments(f, 1, byID)
		if err != nil {
			return nil, err
		}
		out = append(out, spreadAnd(f)...)
	}
	return json.Marshal(out)
}

// segmentFilters reads the stored filters of the segments ids of site; any
// of them missing (unknown, deleted or another site's) is Plausible's 400.
func (db *DB) segmentFilters(ctx context.Context, site string, ids []int64) (map[int64]json.RawMessage, error) {
	uniq := slices.Compact(slices.Sorted(slices.Values(ids)))
	args := []any{site}
	for _, id := range uniq {
		args = append(args, id)
	}
	rows, err := db.read.QueryContext(ctx, `SELECT id, segment_data FROM segments WHERE site_id = ? AND id IN (?`+
		strings.Repeat(", ?", len(uniq)-1)+`)`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	byID := map[int64]json.RawMessage{}
	for rows.Next() {
		var id int64
		var data string
		if err := rows.Scan(&id, &data); err != nil {
			return nil, err
		}
		var d struct {
			Filters json.RawMessage `json:"filters"`
		}
		if json.Unmarshal([]byte(data), &d) == nil && d.Filters != nil {
			byID[id] = d.Filters
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(byID) != len(uniq) {
		return nil, invalidQuery("Invalid filters. Some segments don't exist or aren't accessible.")
	}
	return byID, nil
}

// expandSegments returns the filter tree raw with its segment filters
// replaced by their segments' filters, byID holding every one it names.
// Below the parser's depth, where segmentRefs looked for none, it is left
// as it is (the parser refuses it).
func expandSegments(raw json.RawMessage, depth int, byID map[int64]json.RawMessage) (json.RawMessage, error) {
	var parts []json.RawMessage
	var op string
	if depth > maxFilterDepth || json.Unmarshal(raw, &parts) != nil || len(parts) < 2 || json.Unmarshal(parts[0], &op) != nil {
		return raw, nil
	}
	switch op {
	case "and", "or":
		var children []json.RawMessage
		if len(parts) != 2 || json.Unmarshal(parts[1], &children) != nil {
			return raw, nil
		}
		out := make([]json.RawMessage, len(children))
		for i, c := range children {
			var err error
			if out[i], err = expandSegments(c, depth+1, byID); err != nil {
				return nil, err
			}
		}
		return json.Marshal([]any{op, out})
	case "not", "has_done", "has_not_done":
		if len(parts) != 2 {
			return raw, nil
		}
		c, err := expandSegments(parts[1], depth+1, byID)
		if err != nil {
			return nil, err
		}
		return json.Marshal([]any{op, c})
	}
	var dim string
	if json.Unmarshal(parts[1], &dim) != nil || dim != SegmentDimension || len(parts) != 3 {
		return raw, nil
	}
	var ids []int64
	if json.Unmarshal(parts[2], &ids) != nil {
		return raw, nil // segmentRefs refused it first
	}
	if len(ids) == 1 {
		return json.Marshal([]any{"and", byID[ids[0]]})
	}
	each := make([]any, len(ids))
	for i, id := range ids {
		each[i] = []any{"and", byID[id]}
	}
	return json.Marshal([]any{"or", each})
}

// spreadAnd is a top-level filter as Plausible lists it once segments are
// resolved: an "and" filter's children, anything else itself.
func spreadAnd(raw json.RawMessage) []json.RawMessage {
	var parts []json.RawMessage
	var op string
	var children []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil || len(parts) != 2 || json.Unmarshal(parts[0], &op) != nil || op != "and" ||
		json.Unmarshal(parts[1], &children) != nil || len(children) == 0 {
		return []json.RawMessage{raw}
	}
	return children
}

// withSegments returns req with its filters' segments resolved (req itself
// when it names none).
func (db *DB) withSegments(ctx context.Context, site *Site, req *QueryRequest) (*QueryRequest, error) {
	raw, ok := req.fields["filters"]
	if !ok {
		return req, nil
	}
	resolved, err := db.resolveSegments(ctx, site.ID, raw)
	if err != nil || string(resolved) == string(raw) {
		return req, err
	}
	fields := make(map[string]json.RawMessage, len(req.fields))
	for k, v := range req.fields {
		fields[k] = v
	}
	fields["filters"] = resolved
	return &QueryRequest{fields: fields}, nil
}
