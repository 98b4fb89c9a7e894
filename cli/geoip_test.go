package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestCheckConfigNamesGeoIP: check-config says which GeoIP database
// serving would use: the built-in one with its credit when GEOIP_DB_PATH
// is unset, none for off, else the file.
func TestCheckConfigNamesGeoIP(t *testing.T) {
	t.Parallel()
	tests := []struct {
		path, want string
	}{
		{"", "\n  geoip     built-in countries (IP Geolocation by DB-IP (https://db-ip.com), CC BY 4.0, built 20"},
		{"off", "\n  geoip     off (no address lookup)\n"},
		{"../testdata/geoip-test.mmdb", "\n  geoip     ../testdata/geoip-test.mmdb\n"},
	}
	for _, tt := range tests {
		var stdout, stderr strings.Builder
		env := map[string]string{"GEOIP_DB_PATH": tt.path}
		code := Run([]string{"check-config"}, func(k string) string { return env[k] }, &stdout, &stderr)
		if code != 0 || !strings.Contains(stdout.String(), tt.want) {
			t.Errorf("GEOIP_DB_PATH=%q: got exit %d, stdout %q, stderr %q, want 0 and %q", tt.path, code, stdout.String(), stderr.String(), tt.want)
		}
	}
}

// TestBuiltinGeoIPOverHTTP: out of the box (no GEOIP_DB_PATH), a
// pageview from a public address behind a trusted proxy is answered in
// its country by the query API, end to end through the binary.
func TestBuiltinGeoIPOverHTTP(t *testing.T) {
	t.Parallel()
	_, line := startDevJSON(t, buildBinary(t), "--trust-proxy-headers")
	var setup struct {
		CollectorURL string `json:"collector_url"`
		QueryURL     string `json:"query_url"`
		SiteID       string `json:"site_id"`
		Keys         struct{ Query string }
	}
	if err := json.Unmarshal(line, &setup); err != nil {
		t.Fatalf("got %q: %v", line, err)
	}
	do := func(url, token, forwarded, body string) (int, string) {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		if forwarded != "" {
			req.Header.Set("X-Forwarded-For", forwarded)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	for i, addr := range []string{"193.0.6.139", "8.8.8.8"} {
		ev := fmt.Sprintf(`{"id":"00000000-0000-4000-8000-00000000000%d","site_id":%q,"anon_id":"a%d","type":"pageview","url":"https://example.com/"}`, i+1, setup.SiteID, i)
		if code, body := do(setup.CollectorURL+"/v1/events", setup.SiteID, addr, ev); code != 202 {
			t.Fatalf("send: got %d %s", code, body)
		}
	}
	q := `{"metrics":["visitors"],"date_range":"day","dimensions":["visit:country"],"order_by":[["visit:country","asc"]]}`
	code, body := do(setup.QueryURL+"/v1/sites/"+setup.SiteID+"/query", setup.Keys.Query, "", q)
	if want := `"results":[{"dimensions":["NL"],"metrics":[1]},{"dimensions":["US"],"metrics":[1]}]`; code != 200 || !strings.Contains(body, want) {
		t.Fatalf("got %d %s, want 200 and %s", code, body, want)
	}
}
