package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

func sourcemapBody(release, file string, data []byte) []byte {
	b, _ := json.Marshal(map[string]any{"release": release, "file": file, "map": base64.StdEncoding.EncodeToString(data)})
	return b
}

func TestSourcemapUpload(t *testing.T) {
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
	var stored []byte
	h.sqlDB().QueryRow(`SELECT map FROM sourcemaps`).Scan(&stored)
	if !bytes.Equal(stored, bigger) {
		t.Fatalf("stored map differs from the upload")
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
	if limit := uint64(len(data)) * 5 / 2; allocated > limit {
		t.Fatalf("the upload allocated %d MiB for a %d MiB map (body %d MiB), want under %d MiB: the body is being copied",
			allocated>>20, len(data)>>20, len(body)>>20, limit>>20)
	}
	t.Logf("allocated %d MiB for a %d MiB map (a %d MiB body)", allocated>>20, len(data)>>20, len(body)>>20)
}
