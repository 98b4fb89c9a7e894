package server

import (
	"testing"
	"time"

	"github.com/tally-analytics/tally/schema"
)

// BenchmarkTrackerParse is the cost of mapping one message of each format
// to an event (docs/intake.md#plausible--and-umami-compatible-intake), beside
// Tally's own envelope of the same pageview. Run with:
//
//	go test ./server -run '^$' -bench TrackerParse -count 5
func BenchmarkTrackerParse(b *testing.B) {
	now := time.Date(2026, 1, 31, 9, 5, 0, 0, time.UTC)
	for _, bc := range []struct {
		name  string
		parse func([]byte, time.Time) ([]schema.Event, []refusal, error)
		body  string
	}{
		{"native", parseEnvelopes, `{"id":"3f2504e0-4f89-41d3-9a0c-0305e82c3301","site_id":"web","anon_id":"a","type":"pageview","url":"https://example.com/pricing?utm_source=news","referrer":"https://news.test/story","properties":{"plan":"pro"}}`},
		{"plausible", parsePlausible, `{"n":"pageview","v":36,"u":"https://example.com/pricing?utm_source=news","d":"example.com","r":"https://news.test/story","p":{"plan":"pro"}}`},
		{"umami", parseUmami, `{"type":"event","payload":{"website":"0b5d0e6a-6c7e-4b6e-9a0c-2b8f1c3d4e5f","hostname":"example.com","screen":"1280x720","language":"en-US","title":"Pricing","url":"/pricing?utm_source=news","referrer":"https://news.test/story","data":{"plan":"pro"}}}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			body := []byte(bc.body)
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := bc.parse(body, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
