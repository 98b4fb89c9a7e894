package server

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tally-analytics/tally/internal/dbtest"
)

func sourcemapBody(release, file string, data []byte) []byte {
	b, _ := json.Marshal(map[string]any{"release": release, "file": file, "map": base64.StdEncoding.EncodeToString(data)})
	return b
}

// storedSourcemap reads back the map of (site, release, file) from its
// parts.
func storedSourcemap(t *testing.T, h *harness, site, release, file string) []byte {
	t.Helper()
	rows, err := h.sqlDB().Query(`SELECT p.data FROM sourcemaps s JOIN sourcemap_parts p USING (site_id, upload)
		WHERE s.site_id = ? AND s.release = ? AND s.file = ? ORDER BY p.seq`, site, release, file)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var data []byte
	for rows.Next() {
		var part []byte
		if err := rows.Scan(&part); err != nil {
			t.Fatal(err)
		}
		data = append(data, part...)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return data
}

func TestSourcemapUpload(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	h.setupTenant("bravo", "other")
	mapJSON := []byte(`{"version":3,"sources":["app.ts"],"mappings":"AAAA"}`)
	up := func(path, token string, body any) response {
		return h.q("POST", path, token, body)
	}
	r := up("/v1/sites/web/sourcemaps", "web", sourcemapBody("1.0.0", "app.min.js", mapJSON))
	mustStatus(t, r, 201, "")
	if r.json(t)["size"] != float64(len(mapJSON)) {
		t.Fatalf("got %s, want size %d", r.body, len(mapJSON))
	}
	bigger := append(mapJSON, ' ', ' ')
	mustStatus(t, up("/sites/web/sourcemaps", "web", sourcemapBody("1.0.0", "app.min.js", bigger)), 201, "")
	var n, size int
	h.sqlDB().QueryRow(`SELECT COUNT(*), MAX(size) FROM sourcemaps WHERE site_id = 'web'`).Scan(&n, &size)
	if n != 1 || size != len(bigger) {
		t.Fatalf("got %d rows of size %d after re-upload, want 1 of %d", n, size, len(bigger))
	}
	if stored := storedSourcemap(t, h, "web", "1.0.0", "app.min.js"); !bytes.Equal(stored, bigger) {
		t.Fatalf("stored map differs from the upload")
	}
	// A map of several parts, replaced by another: only the new parts stay.
	for _, large := range [][]byte{bytes.Repeat([]byte("a map "), 700_000), bytes.Repeat([]byte("another "), 400_000)} {
		r := up("/v1/sites/web/sourcemaps", "web", sourcemapBody("1.0.0", "vendor.js", large))
		mustStatus(t, r, 201, "")
		if r.json(t)["size"] != float64(len(large)) {
			t.Fatalf("got %s, want size %d", r.body, len(large))
		}
		if stored := storedSourcemap(t, h, "web", "1.0.0", "vendor.js"); !bytes.Equal(stored, large) {
			t.Fatalf("got a stored map of %d bytes, want the %d uploaded", len(stored), len(large))
		}
	}
	if n := h.count(`SELECT COUNT(*) FROM sourcemap_parts WHERE site_id = 'web' AND length(data) > 1048576`); n != 0 {
		t.Fatalf("got %d parts over 1 MiB, want none", n)
	}
	if n, want := h.count(`SELECT COUNT(*) FROM sourcemap_parts WHERE site_id = 'web'`),
		h.count(`SELECT COUNT(*) FROM sourcemap_parts p JOIN sourcemaps s USING (site_id, upload) WHERE site_id = 'web'`); n != want {
		t.Fatalf("got %d parts, want only the %d of the stored maps", n, want)
	}

	b64 := base64.StdEncoding.EncodeToString(mapJSON)
	escaped := `{"release":"1","file":"a.js","map":"` + strings.ReplaceAll(b64[:20], "/", `\/`) + `\n` + b64[20:] + `","extra":{"nested":[1,"x\"y",{"z":null}]},"n":12.5}`
	tests := []struct {
		name, path, token string
		body              any
		status            int
		code              string
	}{
		{"escaped slash, line break and unknown fields", "/v1/sites/web/sourcemaps", "web", escaped, 201, ""},
		{"no bearer", "/v1/sites/web/sourcemaps", "", sourcemapBody("1", "a.js", mapJSON), 401, "unauthorized"},
		{"another site's bearer", "/v1/sites/web/sourcemaps", "other", sourcemapBody("1", "a.js", mapJSON), 401, "unauthorized"},
		{"the admin token", "/v1/sites/web/sourcemaps", testAdminToken, sourcemapBody("1", "a.js", mapJSON), 401, "unauthorized"},
		{"unknown site, wrong bearer", "/v1/sites/nope/sourcemaps", "web", sourcemapBody("1", "a.js", mapJSON), 401, "unauthorized"},
		{"unknown site, its own id as bearer", "/v1/sites/nope/sourcemaps", "nope", sourcemapBody("1", "a.js", mapJSON), 404, "not_found"},
		{"bad base64", "/v1/sites/web/sourcemaps", "web", `{"release":"1","file":"a.js","map":"@@@@"}`, 400, "invalid_sourcemap"},
		{"truncated base64", "/v1/sites/web/sourcemaps", "web", `{"release":"1","file":"a.js","map":"e30"}`, 400, "invalid_sourcemap"},
		{"base64 too short for a byte", "/v1/sites/web/sourcemaps", "web", `{"release":"1","file":"a.js","map":"!"}`, 400, "invalid_sourcemap"},
		{"data after padding", "/v1/sites/web/sourcemaps", "web", `{"release":"1","file":"a.js","map":"YQ==YQ=="}`, 400, "invalid_sourcemap"},
		{"unicode escape in map", "/v1/sites/web/sourcemaps", "web", `{"release":"1","file":"a.js","map":"\u0041AAA"}`, 400, "invalid_sourcemap"},
		{"map not a string", "/v1/sites/web/sourcemaps", "web", `{"release":"1","file":"a.js","map":5}`, 400, "invalid_sourcemap"},
		{"map missing", "/v1/sites/web/sourcemaps", "web", `{"release":"1","file":"a.js"}`, 400, "invalid_sourcemap"},
		{"release missing", "/v1/sites/web/sourcemaps", "web", sourcemapBody("", "a.js", mapJSON), 400, "invalid_sourcemap"},
		{"file is a path", "/v1/sites/web/sourcemaps", "web", sourcemapBody("1", "dist/a.js", mapJSON), 400, "invalid_sourcemap"},
		{"not json", "/v1/sites/web/sourcemaps", "web", `release=1`, 400, "invalid_json"},
		{"truncated", "/v1/sites/web/sourcemaps", "web", `{"release":"1","file":"a.js","map":"YQ`, 400, "invalid_json"},
		{"trailing garbage", "/v1/sites/web/sourcemaps", "web", `{"release":"1","file":"a.js","map":"YQ=="} x`, 400, "invalid_json"},
		{"duplicate field", "/v1/sites/web/sourcemaps", "web", `{"release":"1","release":"2","file":"a.js","map":"YQ=="}`, 400, "invalid_sourcemap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mustStatus(t, up(tt.path, tt.token, tt.body), tt.status, tt.code)
		})
	}
	foreign := up("/v1/sites/other/sourcemaps", "web", sourcemapBody("1", "a.js", mapJSON))
	missing := up("/v1/sites/nope/sourcemaps", "web", sourcemapBody("1", "a.js", mapJSON))
	if foreign.status != 401 || string(foreign.body) != string(missing.body) {
		t.Fatalf("a foreign site and a missing one must look alike: got %d %s / %d %s", foreign.status, foreign.body, missing.status, missing.body)
	}
}

func TestSourcemapSizeLimit(t *testing.T) {
	// Not parallel: it measures the heap, which other tests would share.
	h := newHarness(t)
	h.setupTenant("acme", "web")
	exact := bytes.Repeat([]byte{'m'}, sourcemapMaxDecoded)
	r := h.q("POST", "/v1/sites/web/sourcemaps", "web", sourcemapBody("1", "big.js", exact))
	mustStatus(t, r, 201, "")
	if r.json(t)["size"] != float64(sourcemapMaxDecoded) {
		t.Fatalf("got %s", r.body)
	}
	over := append(exact, 'm')
	mustStatus(t, h.q("POST", "/v1/sites/web/sourcemaps", "web", sourcemapBody("1", "big.js", over)), 413, "payload_too_large")
	padded := `{"release":"1","file":"a.js","pad":"` + strings.Repeat("x", sourcemapMaxBody) + `","map":"YQ=="}`
	mustStatus(t, h.q("POST", "/v1/sites/web/sourcemaps", "web", padded), 413, "payload_too_large")
}

func TestSourcemapUploadStreams(t *testing.T) {
	// Not parallel: it measures the heap, which other tests would share.
	h := newHarness(t)
	h.setupTenant("acme", "web")
	data := bytes.Repeat([]byte("0123456789abcdef"), 20<<20/16) // 20 MiB
	body := sourcemapBody("1", "app.js", data)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	mustStatus(t, h.q("POST", "/v1/sites/web/sourcemaps", "web", body), 201, "")
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	// The map's pieces go to storage as they are: joining them (41 MiB
	// for this map) or copying the body would exceed this. PostgreSQL's
	// driver copies each part twice on its way to the wire (pgx encodes
	// the bytea, then the Bind message: 40 MiB measured for this map),
	// which is the driver's, not ours.
	limit := uint64(len(data)) * 5 / 4
	if dbtest.Postgres() {
		limit += 2 * uint64(len(data))
	}
	if allocated > limit {
		t.Fatalf("got %d MiB allocated for a %d MiB map (body %d MiB), want under %d MiB: the map or the body is being copied",
			allocated>>20, len(data)>>20, len(body)>>20, limit>>20)
	}
	t.Logf("allocated %d MiB for a %d MiB map (a %d MiB body)", allocated>>20, len(data)>>20, len(body)>>20)
}

// The upload takes the collector's credentials under each REQUIRE_API_KEY
// mode; with a key the path names the site, so X-Site-Id is optional.
func TestSourcemapCredentials(t *testing.T) {
	t.Parallel()
	mapJSON := []byte(`{"version":3,"mappings":"AAAA"}`)
	type want struct {
		status int
		code   string
	}
	created, unauthorized, forbidden, notFound := want{201, ""}, want{401, "unauthorized"}, want{403, "forbidden"}, want{404, "not_found"}
	tests := []struct {
		name               string
		target             func(acme, bravo tenant) (path, token string)
		headers            []string
		none, tag, require want
	}{
		{"site bearer", func(a, _ tenant) (string, string) { return "/v1/sites/web/sourcemaps", "web" }, nil,
			created, created, unauthorized},
		{"ingest key", func(a, _ tenant) (string, string) { return "/v1/sites/web/sourcemaps", a.ingestKey }, nil,
			unauthorized, created, created},
		{"ingest key with X-Site-Id of the path", func(a, _ tenant) (string, string) { return "/v1/sites/web/sourcemaps", a.ingestKey },
			[]string{"X-Site-Id", "web"}, unauthorized, created, created},
		{"ingest key with X-Site-Id of another site", func(a, _ tenant) (string, string) { return "/v1/sites/web/sourcemaps", a.ingestKey },
			[]string{"X-Site-Id", "web2"}, unauthorized, unauthorized, unauthorized},
		{"admin key", func(a, _ tenant) (string, string) { return "/v1/sites/web/sourcemaps", a.adminKey }, nil,
			unauthorized, created, created},
		{"read key", func(a, _ tenant) (string, string) { return "/v1/sites/web/sourcemaps", a.readKey }, nil,
			unauthorized, forbidden, forbidden},
		{"another workspace's ingest key", func(_, b tenant) (string, string) { return "/v1/sites/web/sourcemaps", b.ingestKey }, nil,
			unauthorized, unauthorized, unauthorized},
		{"ingest key, unknown site", func(a, _ tenant) (string, string) { return "/v1/sites/nope/sourcemaps", a.ingestKey }, nil,
			unauthorized, unauthorized, unauthorized},
		{"unknown site, its own id as bearer", func(a, _ tenant) (string, string) { return "/v1/sites/nope/sourcemaps", "nope" }, nil,
			notFound, notFound, unauthorized},
		{"another site's bearer", func(a, _ tenant) (string, string) { return "/v1/sites/web/sourcemaps", "other" }, nil,
			unauthorized, unauthorized, unauthorized},
		{"the admin token", func(a, _ tenant) (string, string) { return "/v1/sites/web/sourcemaps", testAdminToken }, nil,
			unauthorized, unauthorized, unauthorized},
	}
	for _, mode := range []string{KeyModeNone, KeyModeTag, KeyModeRequire} {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.RequireAPIKey = mode })
			acme := h.setupTenant("acme", "web")
			mustStatus(t, h.q("POST", "/v1/workspaces/acme/sites", testAdminToken, map[string]any{"id": "web2", "name": "w2"}), 201, "")
			bravo := h.setupTenant("bravo", "other")
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					w := map[string]want{KeyModeNone: tt.none, KeyModeTag: tt.tag, KeyModeRequire: tt.require}[mode]
					path, token := tt.target(acme, bravo)
					mustStatus(t, h.q("POST", path, token, sourcemapBody("1", "a.js", mapJSON), tt.headers...), w.status, w.code)
				})
			}
		})
	}
}

// Each site stores at most SourcemapMaxFiles files and SourcemapMaxBytes
// bytes; replacing a file counts its new size only, and a refused upload
// writes nothing.
func TestSourcemapQuota(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.SourcemapMaxFiles, c.SourcemapMaxBytes = 2, 100 })
	h.setupTenant("acme", "web")
	h.setupTenant("bravo", "other")
	steps := []struct {
		site, file string
		size       int
		status     int
		code       string
	}{
		{"web", "a.js", 10, 201, ""},
		{"web", "b.js", 10, 201, ""},
		{"web", "c.js", 10, 413, "sourcemap_quota_exceeded"}, // a third file
		{"web", "a.js", 80, 201, ""},                         // replaces a.js: 90 bytes in all
		{"web", "b.js", 30, 413, "sourcemap_quota_exceeded"}, // would be 110 bytes
		{"web", "b.js", 20, 201, ""},                         // exactly 100
		{"other", "c.js", 100, 201, ""},                      // another site has its own caps
	}
	for i, st := range steps {
		r := h.q("POST", "/v1/sites/"+st.site+"/sourcemaps", st.site, sourcemapBody("1", st.file, bytes.Repeat([]byte{'m'}, st.size)))
		if r.status != st.status || r.code() != st.code {
			t.Fatalf("step %d (%s %s, %d bytes): got %d %q, want %d %q; body %s", i, st.site, st.file, st.size, r.status, r.code(), st.status, st.code, r.body)
		}
	}
	var files, total int
	h.sqlDB().QueryRow(`SELECT COUNT(*), SUM(size) FROM sourcemaps WHERE site_id = 'web'`).Scan(&files, &total)
	if files != 2 || total != 100 {
		t.Fatalf("got %d files of %d bytes stored, want 2 of 100", files, total)
	}
}

// Uploads are limited per site: SourcemapUploadsPerMinute at once, then
// one every 60/N seconds; a refused credential costs nothing.
func TestSourcemapRateLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.SourcemapUploadsPerMinute = 3 })
	h.setupTenant("acme", "web")
	h.setupTenant("bravo", "other")
	body := sourcemapBody("1", "a.js", []byte(`{}`))
	for range 5 {
		mustStatus(t, h.q("POST", "/v1/sites/web/sourcemaps", "wrong", body), 401, "unauthorized")
	}
	for range 3 {
		mustStatus(t, h.q("POST", "/v1/sites/web/sourcemaps", "web", body), 201, "")
	}
	r := h.q("POST", "/v1/sites/web/sourcemaps", "web", body)
	mustStatus(t, r, 429, "rate_limited")
	if got := r.header.Get("Retry-After"); got != "20" {
		t.Fatalf("got Retry-After %q, want 20 (one upload every 20 s)", got)
	}
	mustStatus(t, h.q("POST", "/v1/sites/other/sourcemaps", "other", body), 201, "")
	h.clock.Advance(19 * time.Second)
	mustStatus(t, h.q("POST", "/v1/sites/web/sourcemaps", "web", body), 429, "rate_limited")
	h.clock.Advance(time.Second)
	mustStatus(t, h.q("POST", "/v1/sites/web/sourcemaps", "web", body), 201, "")
}

// A client that declares a huge body and sends little gets memory for
// what it sent, not for what it declared.
func TestSourcemapMemoryFollowsArrivedBytes(t *testing.T) {
	// Not parallel: it measures the heap, which other tests would share.
	h := newHarness(t)
	h.setupTenant("acme", "web")
	sent := `{"release":"1","file":"a.js","map":"` + strings.Repeat("QUFB", 16<<10) // 64 KiB of base64
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.query.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/sites/web/sourcemaps HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer web\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		35_000_000, sent)
	conn.(*net.TCPConn).CloseWrite() // the body ends far short of its length
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	runtime.ReadMemStats(&after)
	if res.StatusCode != 400 {
		t.Fatalf("got %d, want 400 for a truncated body", res.StatusCode)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	if allocated > 4<<20 {
		t.Fatalf("got %d KiB allocated for a 64 KiB body declared as 35 MB, want under 4 MiB", allocated>>10)
	}
	t.Logf("allocated %d KiB for a 64 KiB body declared as 35 MB", allocated>>10)
}

// A site deleted between the upload's credential check and its commit gets
// no sourcemap: the answer is the deleted site's 404, and a site created
// again with the id starts without maps.
func TestSourcemapSiteDeletedMidRequest(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.setupTenant("acme", "web")
	// The request reads the clock right after its credential check: the
	// site goes away at that moment.
	h.clock.OnNextRead(func() {
		mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/sites/web", testAdminToken, nil), 204, "")
	})
	mustStatus(t, h.q("POST", "/v1/sites/web/sourcemaps", "web", sourcemapBody("1", "a.js", []byte(`{}`))), 404, "not_found")
	if n := h.count(`SELECT COUNT(*) FROM sourcemaps WHERE site_id = 'web'`) + h.count(`SELECT COUNT(*) FROM sourcemap_parts WHERE site_id = 'web'`); n != 0 {
		t.Fatalf("got %d sourcemaps and parts of the deleted site, want 0", n)
	}
}

// An admin frees room under the caps by deleting a release, or one file of
// it; the delete is audited and needs the admin token or an admin key.
func TestSourcemapDelete(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.SourcemapMaxFiles = 3 })
	acme := h.setupTenant("acme", "web")
	bravo := h.setupTenant("bravo", "other")
	for _, up := range []struct{ release, file string }{{"1", "a.js"}, {"1", "b.js"}, {"2", "a.js"}} {
		mustStatus(t, h.q("POST", "/v1/sites/web/sourcemaps", "web", sourcemapBody(up.release, up.file, []byte(`{"v":3}`))), 201, "")
	}
	mustStatus(t, h.q("POST", "/v1/sites/web/sourcemaps", "web", sourcemapBody("3", "a.js", []byte(`{}`))), 413, "sourcemap_quota_exceeded")

	tests := []struct {
		name, query, token string
		status             int
		code               string
		files, bytes       float64
	}{
		{"the upload credential", "?release=1", "web", 401, "unauthorized", 0, 0},
		{"a read key", "?release=1", acme.readKey, 403, "forbidden", 0, 0},
		{"another workspace's admin key", "?release=1", bravo.adminKey, 404, "not_found", 0, 0},
		{"no release", "", acme.adminKey, 400, "invalid_sourcemap", 0, 0},
		{"an unknown release", "?release=9", acme.adminKey, 404, "not_found", 0, 0},
		{"one file of a release", "?release=1&file=a.js", acme.adminKey, 200, "", 1, 7},
		{"the rest of the release", "?release=1", testAdminToken, 200, "", 1, 7},
		{"again", "?release=1", acme.adminKey, 404, "not_found", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.q("DELETE", "/v1/sites/web/sourcemaps"+tt.query, tt.token, nil)
			mustStatus(t, r, tt.status, tt.code)
			if tt.status == 200 {
				if got := r.json(t); got["files"] != tt.files || got["bytes"] != tt.bytes {
					t.Fatalf("got %s, want files %v and bytes %v", r.body, tt.files, tt.bytes)
				}
			}
		})
	}
	if n := h.count(`SELECT COUNT(*) FROM sourcemaps WHERE site_id = 'web'`); n != 1 {
		t.Fatalf("got %d sourcemaps left, want release 2's one", n)
	}
	if n := h.count(`SELECT COUNT(*) FROM sourcemap_parts WHERE site_id = 'web'`); n != 1 {
		t.Fatalf("got %d sourcemap parts left, want release 2's one", n)
	}
	if n := h.count(`SELECT COUNT(*) FROM audit_log WHERE action = 'sourcemap.delete' AND target = 'web'`); n != 2 {
		t.Fatalf("got %d sourcemap.delete audit rows, want 2", n)
	}
	mustStatus(t, h.q("POST", "/v1/sites/web/sourcemaps", "web", sourcemapBody("3", "a.js", []byte(`{}`))), 201, "")
}
