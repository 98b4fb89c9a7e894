package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tally-analytics/tally/storage"
)

// segmentData is a segment_data body of the filters given.
func segmentData(filters ...any) map[string]any {
	return map[string]any{"filters": filters}
}

// createSegment creates a segment of site with token and returns its id.
func createSegment(t *testing.T, h *harness, token, site, name, typ string, data any) int64 {
	t.Helper()
	r := h.q("POST", "/v1/sites/"+site+"/segments", token, map[string]any{"name": name, "type": typ, "segment_data": data})
	mustStatus(t, r, 201, "")
	return int64(r.json(t)["id"].(float64))
}

// errorMessage is the message of r's error envelope.
func errorMessage(t *testing.T, r response) string {
	t.Helper()
	var e struct {
		Error struct{ Message string } `json:"error"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
	return e.Error.Message
}

// TestSegmentsCreateReadUpdateDelete checks the segment resource: 201 with
// the segment and its owner, the list (site segments and the caller's own
// personal ones, the last updated first), one read by id, PATCH changing
// the fields given and the owner, 204 then 404 on delete, and an audit row
// for each change without the filters' values.
func TestSegmentsCreateReadUpdateDelete(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	de := segmentData([]any{"is", "visit:country", list("DE")})
	r := h.q("POST", "/v1/sites/web/segments", tn.adminKey, map[string]any{"name": " Germany ", "type": "site",
		"segment_data": map[string]any{"filters": []any{[]any{"is", "visit:country", list("DE")}}, "labels": map[string]any{"DE": "Germany"}}})
	mustStatus(t, r, 201, "")
	created := r.json(t)
	if created["name"] != "Germany" || created["type"] != "site" || created["site_id"] != "web" || created["owner_kind"] != "apiKey" ||
		created["owner_id"] != tn.adminKID || created["inserted_at"] != created["updated_at"] {
		t.Errorf("got %s, want the segment, name trimmed, owned by the admin key", r.body)
	}
	if got, _ := json.Marshal(created["segment_data"]); string(got) != `{"filters":[["is","visit:country",["DE"]]],"labels":{"DE":"Germany"}}` {
		t.Errorf("got segment_data %s, want it as sent", got)
	}
	germany := fmt.Sprint(created["id"])
	mine := createSegment(t, h, testAdminToken, "web", "Mine", "personal", de)
	theirs := createSegment(t, h, tn.adminKey, "web", "Theirs", "personal", de)

	for _, c := range []struct {
		name, token string
		want        string // names, in order
	}{
		{"the admin token sees its own personal segment", testAdminToken, "Mine Germany"},
		{"the admin key sees its own", tn.adminKey, "Theirs Germany"},
		{"a read key sees the site's", tn.readKey, "Germany"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := h.q("GET", "/v1/sites/web/segments", c.token, nil)
			mustStatus(t, r, 200, "")
			var l struct {
				Segments []struct{ Name string } `json:"segments"`
			}
			if err := json.Unmarshal(r.body, &l); err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, s := range l.Segments {
				names = append(names, s.Name)
			}
			if got := strings.Join(names, " "); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
	// One read by id: any of the site's, as Plausible's.
	r = h.q("GET", fmt.Sprintf("/v1/sites/web/segments/%d", theirs), tn.readKey, nil)
	mustStatus(t, r, 200, "")
	if r.json(t)["name"] != "Theirs" {
		t.Errorf("got %s, want Theirs", r.body)
	}

	r = h.q("PATCH", "/v1/sites/web/segments/"+germany, testAdminToken, map[string]any{"name": "DACH",
		"segment_data": segmentData([]any{"is", "visit:country", list("DE", "AT", "CH")})})
	mustStatus(t, r, 200, "")
	patched := r.json(t)
	if patched["name"] != "DACH" || patched["type"] != "site" || patched["owner_kind"] != "admin" || patched["owner_id"] != nil ||
		patched["inserted_at"] != created["inserted_at"] {
		t.Errorf("got %s, want DACH, still a site segment, owned by the admin token now", r.body)
	}
	r = h.q("GET", "/v1/sites/web/segments/"+germany, tn.readKey, nil)
	if got, _ := json.Marshal(r.json(t)["segment_data"]); string(got) != `{"filters":[["is","visit:country",["DE","AT","CH"]]]}` {
		t.Errorf("got segment_data %s, want the new one", got)
	}
	mustStatus(t, h.q("PATCH", fmt.Sprintf("/v1/sites/web/segments/%d", mine), testAdminToken, map[string]any{"type": "site"}), 200, "")

	mustStatus(t, h.q("DELETE", fmt.Sprintf("/v1/sites/web/segments/%d", theirs), tn.adminKey, nil), 204, "")
	for _, m := range []string{"GET", "PATCH", "DELETE"} {
		mustStatus(t, h.q(m, fmt.Sprintf("/v1/sites/web/segments/%d", theirs), tn.adminKey, map[string]any{"name": "x"}), 404, "not_found")
	}
	mustStatus(t, h.q("GET", "/v1/sites/web/segments/nope", tn.adminKey, nil), 404, "not_found")

	rows, err := h.sqlDB().Query(`SELECT action, target, metadata FROM audit_log WHERE action LIKE 'segment.%' ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var action, target, meta string
		if err := rows.Scan(&action, &target, &meta); err != nil {
			t.Fatal(err)
		}
		got = append(got, action+" "+target+" "+meta)
	}
	want := []string{
		`segment.create web {"name":"Germany","segment_id":1,"type":"site"}`,
		`segment.create web {"name":"Mine","segment_id":2,"type":"personal"}`,
		`segment.create web {"name":"Theirs","segment_id":3,"type":"personal"}`,
		`segment.update web {"changed":["name","segment_data"],"name":"DACH","previous_name":"Germany","segment_id":1,"type":"site"}`,
		`segment.update web {"changed":["type"],"name":"Mine","previous_type":"personal","segment_id":2,"type":"site"}`,
		`segment.delete web {"name":"Theirs","segment_id":3,"type":"personal"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got audit rows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSegmentBadInput checks that every malformed segment is a 400 naming
// what is wrong (filters with the query parser's own message), on create
// and on update, and that nothing is stored or changed.
func TestSegmentBadInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	ok := segmentData([]any{"is", "visit:country", list("DE")})
	id := createSegment(t, h, tn.adminKey, "web", "DE", "site", ok)
	body := func(k string, v any) map[string]any {
		b := map[string]any{"name": "n", "type": "site", "segment_data": ok}
		if v == nil {
			delete(b, k)
		} else {
			b[k] = v
		}
		return b
	}
	big := make([]any, 0)
	for range 60 {
		big = append(big, []any{"is", "event:page", list("/" + strings.Repeat("x", 90))})
	}
	for _, c := range []struct {
		name   string
		body   any
		create bool   // on create only (a PATCH may leave it out)
		code   string // "" is invalid_segment
		want   string // in the message
	}{
		{"not an object", `[1]`, false, "invalid_json", "JSON object"},
		{"no name", body("name", nil), true, "", "name is required"},
		{"name a number", body("name", 3), false, "", "name must be a string"},
		{"blank name", body("name", "  "), false, "", "name must be a non-empty string"},
		{"long name", body("name", strings.Repeat("x", 256)), false, "", "255"},
		{"no type", body("type", nil), true, "", "type is required"},
		{"unknown type", body("type", "team"), false, "", `"personal" or "site"`},
		{"no segment_data", body("segment_data", nil), true, "", "segment_data is required"},
		{"segment_data an array", body("segment_data", []any{ok}), false, "", "segment_data must be an object"},
		{"segment_data null", body("segment_data", "null"), false, "", "segment_data must be an object"},
		{"no filters", body("segment_data", map[string]any{"labels": map[string]any{}}), false, "", `"filters" must be an array with at least one member`},
		{"empty filters", body("segment_data", map[string]any{"filters": []any{}}), false, "", `"filters" must be an array with at least one member`},
		{"other property", body("segment_data", map[string]any{"filters": ok["filters"], "dimensions": list("visit:country")}), false, "", `except "filters" and "labels"`},
		{"labels an array", body("segment_data", map[string]any{"filters": ok["filters"], "labels": list("DE")}), false, "", `"labels" must be an object or null`},
		{"too large", body("segment_data", map[string]any{"filters": big}), false, "", "5120"},
		{"unknown dimension", body("segment_data", segmentData([]any{"is", "visit:nope", list("x")})), false, "", `segment_data: unknown dimension "visit:nope"`},
		{"bad operator", body("segment_data", segmentData([]any{"is_maybe", "visit:country", list("DE")})), false, "", `unknown filter operator "is_maybe"`},
		{"bad country", body("segment_data", segmentData([]any{"is", "visit:country", list("Germany")})), false, "", "2-letter country code"},
		{"a time dimension", body("segment_data", segmentData([]any{"is", "time:day", list("2026-01-01")})), false, "", "time dimensions cannot be filtered on"},
		{"has_done of a visit", body("segment_data", segmentData([]any{"has_done", []any{"is", "visit:country", list("DE")}})), false, "", "tests events only"},
		{"a segment", body("segment_data", segmentData([]any{"is", "segment", []any{id}})), false, "", "may not name a segment"},
		{"a segment within", body("segment_data", segmentData([]any{"or", []any{[]any{"is", "visit:country", list("FR")}, []any{"not", []any{"is", "segment", []any{id}}}}})), false, "", "may not name a segment"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code := c.code
			if code == "" {
				code = "invalid_segment"
			}
			r := h.q("POST", "/v1/sites/web/segments", tn.adminKey, c.body)
			mustStatus(t, r, 400, code)
			if !strings.Contains(errorMessage(t, r), c.want) {
				t.Errorf("got %s, want the message to hold %q", r.body, c.want)
			}
			if c.create {
				return
			}
			r = h.q("PATCH", fmt.Sprintf("/v1/sites/web/segments/%d", id), tn.adminKey, c.body)
			mustStatus(t, r, 400, code)
			if !strings.Contains(errorMessage(t, r), c.want) {
				t.Errorf("PATCH: got %s, want the message to hold %q", r.body, c.want)
			}
		})
	}
	r := h.q("PATCH", fmt.Sprintf("/v1/sites/web/segments/%d", id), tn.adminKey, map[string]any{"labels": "x"})
	mustStatus(t, r, 400, "invalid_segment")
	if !strings.Contains(string(r.body), "nothing to change") {
		t.Errorf("got %s, want nothing to change", r.body)
	}
	if n := h.count(`SELECT COUNT(*) FROM segments`); n != 1 {
		t.Errorf("got %d segments stored, want 1", n)
	}
	r = h.q("GET", fmt.Sprintf("/v1/sites/web/segments/%d", id), tn.readKey, nil)
	if got := r.json(t)["name"]; got != "DE" {
		t.Errorf("got name %v, want DE unchanged", got)
	}
}

// TestSegmentAccess checks who may do what: an admin key or the admin
// token write segments, a read key lists and reads them (403 on a write),
// and a key of another workspace gets the ordinary 404 for the site, its
// segments and their use in a query; a segment read through another site
// is 404 too.
func TestSegmentAccess(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	other := h.setupTenant("other", "shop")
	data := segmentData([]any{"is", "visit:country", list("DE")})
	id := fmt.Sprint(createSegment(t, h, tn.adminKey, "web", "DE", "site", data))
	seg := map[string]any{"name": "x", "type": "site", "segment_data": data}
	for _, c := range []struct {
		name, method, path, token string
		body                      any
		status                    int
		code                      string
	}{
		{"read key lists", "GET", "/v1/sites/web/segments", tn.readKey, nil, 200, ""},
		{"read key reads", "GET", "/v1/sites/web/segments/" + id, tn.readKey, nil, 200, ""},
		{"read key cannot create", "POST", "/v1/sites/web/segments", tn.readKey, seg, 403, "forbidden"},
		{"read key cannot update", "PATCH", "/v1/sites/web/segments/" + id, tn.readKey, seg, 403, "forbidden"},
		{"read key cannot delete", "DELETE", "/v1/sites/web/segments/" + id, tn.readKey, nil, 403, "forbidden"},
		{"ingest key cannot list", "GET", "/v1/sites/web/segments", tn.ingestKey, nil, 403, "forbidden"},
		{"no credential", "GET", "/v1/sites/web/segments", "", nil, 401, "unauthorized"},
		{"foreign key lists", "GET", "/v1/sites/web/segments", other.adminKey, nil, 404, "not_found"},
		{"foreign key reads", "GET", "/v1/sites/web/segments/" + id, other.adminKey, nil, 404, "not_found"},
		{"foreign key creates", "POST", "/v1/sites/web/segments", other.adminKey, seg, 404, "not_found"},
		{"foreign key updates", "PATCH", "/v1/sites/web/segments/" + id, other.adminKey, seg, 404, "not_found"},
		{"foreign key deletes", "DELETE", "/v1/sites/web/segments/" + id, other.adminKey, nil, 404, "not_found"},
		{"a segment through another site", "GET", "/v1/sites/shop/segments/" + id, other.adminKey, nil, 404, "not_found"},
		{"deleted through another site", "DELETE", "/v1/sites/shop/segments/" + id, other.adminKey, nil, 404, "not_found"},
		{"unknown site", "GET", "/v1/sites/nope/segments", testAdminToken, nil, 404, "not_found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mustStatus(t, h.q(c.method, c.path, c.token, c.body), c.status, c.code)
		})
	}
	// Another site's segment in a query is an unknown one.
	r := h.q("POST", "/api/v2/query", other.readKey, map[string]any{"site_id": "shop", "metrics": list("visitors"), "date_range": "7d",
		"filters": []any{[]any{"is", "segment", []any{json.Number(id)}}}})
	mustPlausibleStatus(t, r, 400, "Invalid filters. Some segments don't exist or aren't accessible.")
	if n := h.count(`SELECT COUNT(*) FROM segments WHERE site_id = 'web' AND name = 'DE'`); n != 1 {
		t.Errorf("got %d segments DE of web, want 1", n)
	}
}

// TestSegmentLimit checks the bound on a site's segments, Plausible's 500:
// the next one is 409, and a deletion makes room.
func TestSegmentLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	data := segmentData([]any{"is", "visit:country", list("DE")})
	var first int64
	for i := range storage.MaxSegmentsPerSite {
		id := createSegment(t, h, testAdminToken, "web", fmt.Sprint(i), "site", data)
		if i == 0 {
			first = id
		}
	}
	seg := map[string]any{"name": "one more", "type": "site", "segment_data": data}
	r := h.q("POST", "/v1/sites/web/segments", tn.adminKey, seg)
	mustStatus(t, r, 409, "segment_limit_reached")
	if !strings.Contains(string(r.body), "500") {
		t.Errorf("got %s, want the message to give the bound", r.body)
	}
	mustStatus(t, h.q("DELETE", fmt.Sprintf("/v1/sites/web/segments/%d", first), tn.adminKey, nil), 204, "")
	mustStatus(t, h.q("POST", "/v1/sites/web/segments", tn.adminKey, seg), 201, "")
}

// TestSegmentsGoWithTheirSite checks that deleting a site deletes its
// segments, counted in the site.delete audit row, and that a site created
// again with the id has none.
func TestSegmentsGoWithTheirSite(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	mustStatus(t, h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": "keep", "name": "keep"}), 201, "")
	data := segmentData([]any{"is", "visit:country", list("DE")})
	for _, site := range []string{"web", "keep"} {
		createSegment(t, h, tn.adminKey, site, "DE", "site", data)
	}
	mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/sites/web", testAdminToken, nil), 204, "")
	if n := h.count(`SELECT COUNT(*) FROM segments WHERE site_id = 'web'`); n != 0 {
		t.Errorf("got %d segments of the deleted site, want 0", n)
	}
	if n := h.count(`SELECT COUNT(*) FROM segments WHERE site_id = 'keep'`); n != 1 {
		t.Errorf("got %d segments of the other site, want 1", n)
	}
	var meta string
	if err := h.sqlDB().QueryRow(`SELECT metadata FROM audit_log WHERE action = 'site.delete'`).Scan(&meta); err != nil {
		t.Fatal(err)
	}
	var m struct {
		DeletedRows map[string]int `json:"deleted_rows"`
	}
	if err := json.Unmarshal([]byte(meta), &m); err != nil || m.DeletedRows["segments"] != 1 {
		t.Errorf("got the site.delete metadata %s, want it to count 1 segment", meta)
	}
	mustStatus(t, h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": "web", "name": "web"}), 201, "")
	r := h.q("GET", "/v1/sites/web/segments", testAdminToken, nil)
	mustStatus(t, r, 200, "")
	if got := strings.TrimSpace(string(r.body)); got != `{"segments":[]}` {
		t.Errorf("got %s, want no segments", got)
	}
}

// TestQuerySegments checks ["is", "segment", [id, ...]] in the query API
// over queryDataSet: each query answers what the same query with the
// segments' filters written in it answers (and, for some, the figures by
// hand), at the top level and within and, or, not and has_done; several
// ids are any of the segments (Plausible's or); the answer's
// query.filters shows them expanded, as Plausible's does; and a segment
// changed or deleted changes the answers of closed days (the partials and
// the report cache keep filters, not segment ids).
func TestQuerySegments(t *testing.T) {
	t.Parallel()
	h, tn := newQueryHarness(t)
	mustStatus(t, h.q("POST", "/v1/sites/web/goals", tn.adminKey, map[string]any{"name": "Signup", "event_name": "signup"}), 201, "")
	de := []any{"is", "visit:country", list("DE")}
	fr := []any{"is", "visit:country", list("FR")}
	pricing := []any{"is", "event:page", list("/pricing")}
	chrome := []any{"is", "visit:browser", list("Chrome")}
	signedUp := []any{"has_done", []any{"is", "event:goal", list("Signup")}}
	segDE := createSegment(t, h, tn.adminKey, "web", "DE", "site", segmentData(de))
	segFR := createSegment(t, h, tn.adminKey, "web", "FR", "personal", segmentData(fr))
	segChromePricing := createSegment(t, h, tn.adminKey, "web", "Chrome pricing", "site", segmentData(chrome, pricing))
	segSignedUp := createSegment(t, h, tn.adminKey, "web", "Signed up", "site", segmentData(signedUp))
	seg := func(ids ...int64) []any { return []any{"is", "segment", ids} }
	metrics := list("visitors", "visits", "pageviews", "events")
	for _, c := range []struct {
		name            string
		dims            []string
		filters, inline []any
		want            string // "" to compare with inline only
	}{
		{"one segment", nil, []any{seg(segDE)}, []any{de}, "2 3 5 6"},
		{"a segment of two filters", nil, []any{seg(segChromePricing)}, []any{chrome, pricing}, ""},
		{"with a filter of the query", list("event:page"), []any{seg(segDE), pricing}, []any{de, pricing}, ""},
		{"two ids: either", list("visit:country"), []any{seg(segDE, segFR)}, []any{[]any{"or", []any{de, fr}}}, "DE: 2 3 5 6; FR: 1 1 1 1"},
		{"within and", nil, []any{[]any{"and", []any{seg(segDE), seg(segChromePricing)}}}, []any{de, chrome, pricing}, ""},
		{"within or", list("visit:country"), []any{[]any{"or", []any{seg(segFR), seg(segChromePricing)}}}, []any{[]any{"or", []any{fr, []any{"and", []any{chrome, pricing}}}}}, ""},
		{"within not", list("visit:country"), []any{[]any{"not", seg(segDE)}}, []any{[]any{"not", de}}, ""},
		{"a behavioural segment", list("visit:country"), []any{seg(segSignedUp)}, []any{signedUp}, "DE: 1 1 2 3"},
		{"by day", list("time:day"), []any{seg(segDE, segFR)}, []any{[]any{"or", []any{de, fr}}}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := queryRows(t, h, tn.readKey, "web", q(metrics, c.dims, c.filters...))
			if want := queryRows(t, h, tn.readKey, "web", q(metrics, c.dims, c.inline...)); got != want {
				t.Errorf("got %q, want %q as with the filters written in", got, want)
			}
			if c.want != "" && got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}

	// The echo: Plausible's resolved filters, the top-level and spread.
	r := h.q("POST", "/api/v2/query", tn.readKey, q(list("visitors"), nil,
		[]any{"and", []any{seg(segDE, segFR), seg(segChromePricing)}}))
	mustStatus(t, r, 200, "")
	var a struct {
		Query struct {
			Filters json.RawMessage `json:"filters"`
		} `json:"query"`
	}
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatal(err)
	}
	want := `[["or",[["and",[["is","visit:country",["DE"]]]],["and",[["is","visit:country",["FR"]]]]]],` +
		`["and",[["is","visit:browser",["Chrome"]],["is","event:page",["/pricing"]]]]]`
	if string(a.Query.Filters) != want {
		t.Errorf("got query.filters %s, want %s", a.Query.Filters, want)
	}

	// A segment changed: the same query (of closed days, kept in the
	// report cache or the partials) follows its new filters.
	body := q(metrics, list("visit:country"), seg(segDE))
	if got := queryRows(t, h, tn.readKey, "web", body); got != "DE: 2 3 5 6" {
		t.Fatalf("got %q, want DE's figures", got)
	}
	mustStatus(t, h.q("PATCH", fmt.Sprintf("/v1/sites/web/segments/%d", segDE), tn.adminKey, map[string]any{"segment_data": segmentData(fr)}), 200, "")
	if got := queryRows(t, h, tn.readKey, "web", body); got != "FR: 1 1 1 1" {
		t.Errorf("got %q after the segment changed, want FR's figures", got)
	}
	// A funnel's filters take segments too.
	r = h.q("POST", "/v1/sites/web/funnel", tn.readKey, map[string]any{"steps": list("Signup", "Signup"), "date_range": january,
		"filters": []any{seg(segFR)}})
	mustStatus(t, r, 200, "")
	if !strings.Contains(string(r.body), `"visitors":0`) {
		t.Errorf("got funnel %s, want no FR signup", r.body)
	}
	mustStatus(t, h.q("DELETE", fmt.Sprintf("/v1/sites/web/segments/%d", segDE), tn.adminKey, nil), 204, "")
	mustPlausibleStatus(t, h.q("POST", "/api/v2/query", tn.readKey, body), 400, "Invalid filters. Some segments don't exist or aren't accessible.")
}

// TestQuerySegmentErrors checks the refusals of segment filters, on both
// routes: Plausible's messages for unknown segments and for more than 10
// ids, and Tally's for a segment filter of another shape.
func TestQuerySegmentErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	id := createSegment(t, h, tn.adminKey, "web", "DE", "site", segmentData([]any{"is", "visit:country", list("DE")}))
	eleven := make([]any, 11)
	for i := range eleven {
		eleven[i] = []any{"is", "segment", []any{id}}
	}
	for _, c := range []struct {
		name    string
		body    map[string]any
		code    string
		message string
	}{
		{"unknown id", q(list("visitors"), nil, []any{"is", "segment", []any{id + 1}}), "invalid_query", "Invalid filters. Some segments don't exist or aren't accessible."},
		{"one of two unknown", q(list("visitors"), nil, []any{"is", "segment", []any{id, id + 1}}), "invalid_query", "Invalid filters. Some segments don't exist or aren't accessible."},
		{"eleven", q(list("visitors"), nil, []any{"and", eleven}), "invalid_query", "Invalid filters. You can only use up to 10 segment filters in a query."},
		{"string id", q(list("visitors"), nil, []any{"is", "segment", list(fmt.Sprint(id))}), "invalid_query", "Invalid filter '"},
		{"no ids", q(list("visitors"), nil, []any{"is", "segment", []any{}}), "invalid_query", "one or more segment ids"},
		{"is_not", q(list("visitors"), nil, []any{"is_not", "segment", []any{id}}), "invalid_query", `["not", ["is", "segment", [id]]]`},
		{"as a dimension", q(list("visitors"), list("segment")), "invalid_query", "segment is a filter only"},
		{"not metrics first", map[string]any{"site_id": "web", "date_range": "7d", "filters": []any{[]any{"is", "segment", []any{id}}}}, "invalid_query", "metrics is required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := h.q("POST", "/v1/sites/web/query", tn.readKey, c.body)
			mustStatus(t, r, 400, c.code)
			if !strings.Contains(errorMessage(t, r), c.message) {
				t.Errorf("got %s, want %q", r.body, c.message)
			}
			mustPlausibleStatus(t, h.q("POST", "/api/v2/query", tn.readKey, c.body), 400, c.message)
		})
	}
}
