package server

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/tally-analytics/tally/schema"
	"github.com/tally-analytics/tally/storage"
)

// FuzzIntake posts arbitrary bodies to the real collector over a real
// database: every answer must be a 202 or a 4xx, never a 5xx or a panic.
func FuzzIntake(f *testing.F) {
	for _, seed := range []string{
		`{"id":"3f2504e0-4f89-41d3-9a0c-0305e82c3301","site_id":"web","anon_id":"a","type":"pageview"}`,
		`[{"id":"3f2504e0-4f89-41d3-9a0c-0305e82c3302","site_id":"web","anon_id":"a","type":"identify","user_id":"u","traits":{"x":1}}]`,
		`{"id":"3f2504e0-4f89-41d3-9a0c-0305e82c3303","site_id":"web","anon_id":"a","type":"purchase","properties":{"amount":-1}}`,
		`{"id":"3f2504e0-4f89-41d3-9a0c-0305e82c3304","site_id":"web","anon_id":"a","type":"x","consent":"denied","url":"%zz?q"}`,
		`{"id":"3f2504e0-4f89-41d3-9a0c-0305e82c3305","site_id":"web","anon_id":"a","type":"x","ts":"1999-01-01T00:00:00Z"}`,
		`[1,"a",null]`, `{`, ``, `null`,
	} {
		f.Add([]byte(seed))
	}
	db, err := storage.Open(context.Background(), storage.Options{Path: filepath.Join(f.TempDir(), "fuzz.db")})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	plan, err := schema.LoadPlan("../testdata/plan.json")
	if err != nil {
		f.Fatal(err)
	}
	srv := New(Config{Plan: plan, Logger: discardLogger(), Quota: 1 << 30}, db)
	ws, _ := db.CreateWorkspace(context.Background(), storage.Actor{Kind: storage.ActorSystem}, "F", "f")
	db.CreateSite(context.Background(), storage.Actor{Kind: storage.ActorSystem}, ws, "web", "Web")
	h := srv.Collector()
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range []string{"/v1/events", "/v1/s2s/events"} {
			req := httptest.NewRequest("POST", path, bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer web")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusAccepted && (rec.Code < 400 || rec.Code >= 500) {
				t.Fatalf("%s: got %d %s for body %q", path, rec.Code, rec.Body, body)
			}
		}
	})
}
