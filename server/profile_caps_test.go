package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tally-analytics/tally/storage"
)

// profileOf reads user's profile on site: its text and its traits.
func profileOf(t *testing.T, h *harness, site, user string) (string, map[string]any) {
	t.Helper()
	var text string
	if err := h.sqlDB().QueryRow(`SELECT traits FROM user_profiles WHERE site_id = ? AND user_id = ?`, site, user).Scan(&text); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		t.Fatal(err)
	}
	return text, m
}

// TestSegmentIdentifyProfileCap sends what issue 29 found stalling the
// writer: /v1/batch bodies of 2,500 identifies of one userId with 3 new
// traits each. The profile stays within its caps; every message is
// stored; the answer counts the identifies whose traits were not all
// taken, and the inspection feed says which traits and why.
func TestSegmentIdentifyProfileCap(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.DebugFeedSize = 10 })
	h.setupTenant("acme", "shop")
	n := 0
	dropped := 0
	for batch := range 4 {
		parts := make([]string, segmentMaxBatch)
		for i := range parts {
			n++
			parts[i] = fmt.Sprintf(`{"type":"identify","userId":"victim","messageId":"m%d","traits":{"plan":"p%d","t%d_a":"%s","t%d_b":%d,"t%d_c":true}}`,
				n, n, n, strings.Repeat("v", 20), n, n, n)
		}
		a := segmentOKAnswer(t, h.segmentPost("/v1/batch", "shop", `{"batch":[`+strings.Join(parts, ",")+`]}`))
		if a.Accepted != segmentMaxBatch || a.TraitsDropped < 0 || a.TraitsDropped > segmentMaxBatch {
			t.Fatalf("batch %d: got %+v, want %d accepted", batch, a, segmentMaxBatch)
		}
		dropped += a.TraitsDropped
		text, traits := profileOf(t, h, "shop", "victim")
		if len(text) > storage.MaxProfileBytes || len(traits) > storage.MaxProfileTraits {
			t.Fatalf("batch %d: got a profile of %d bytes and %d traits, want at most %d and %d",
				batch, len(text), len(traits), storage.MaxProfileBytes, storage.MaxProfileTraits)
		}
		if traits["plan"] != fmt.Sprintf("p%d", n) {
			t.Fatalf("batch %d: got plan %v, want p%d: a trait the profile holds still changes", batch, traits["plan"], n)
		}
		// Each message that did not add its 3 traits was counted.
		if kept := len(traits) - 1; kept+3*dropped < 3*n || kept+3*(dropped-1) >= 3*n {
			t.Fatalf("batch %d: got %d new traits kept and %d identifies counted with traits dropped, of %d", batch, kept, dropped, n)
		}
	}
	if dropped < 3*segmentMaxBatch {
		t.Fatalf("got %d identifies with traits dropped, want most of the last three batches", dropped)
	}
	var list decisionsAnswer
	json.Unmarshal(h.q("GET", "/v1/debug/decisions", "", nil).body, &list)
	d := list.Decisions[0]
	want := fmt.Sprintf(`3 of its traits were not merged into the user's profile ("t%d_a", "t%d_b", "t%d_c")`, n, n, n)
	if d.Outcome != outcomeAccepted || len(d.Details) != 1 || d.Details[0].Path != fmt.Sprintf("/batch/%d/traits", segmentMaxBatch-1) ||
		!strings.Contains(d.Details[0].Message, want) {
		t.Fatalf("got %+v, want the last message accepted, with a detail at its traits saying %s", d, want)
	}
}

// TestNativeIdentifyProfileCap sends an identify of more traits than a
// profile holds to /s2s/events: the event is stored (202), the answer
// says its traits were not all taken, and an identify within the caps
// answers as before, without traits_dropped.
func TestNativeIdentifyProfileCap(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.DebugFeedSize = 10 })
	h.setupTenant("acme", "web")
	traits := map[string]any{}
	for i := range storage.MaxProfileTraits + 200 {
		traits[fmt.Sprintf("k%04d", i)] = i
	}
	r := h.c("POST", "/s2s/events", "web", ev("web", 1, map[string]any{"type": "identify", "user_id": "u1", "traits": traits}))
	mustStatus(t, r, 202, "")
	var a intakeAnswer
	json.Unmarshal(r.body, &a)
	if a != (intakeAnswer{Accepted: 1, TraitsDropped: 1}) {
		t.Fatalf("got %s, want 1 accepted and traits_dropped 1", r.body)
	}
	if _, got := profileOf(t, h, "web", "u1"); len(got) != storage.MaxProfileTraits {
		t.Fatalf("got %d traits, want %d", len(got), storage.MaxProfileTraits)
	}
	var list decisionsAnswer
	json.Unmarshal(h.q("GET", "/v1/debug/decisions", "", nil).body, &list)
	if d := list.Decisions[0]; len(d.Details) != 1 || d.Details[0].Path != "/traits" || !strings.Contains(d.Details[0].Message, "200 of its traits") ||
		!strings.Contains(d.Details[0].Message, " and 195 more") {
		t.Fatalf("got %+v, want a detail at /traits naming 5 of the 200 traits dropped", d)
	}
	// An existing trait still changes; within the caps nothing is said.
	r = h.c("POST", "/s2s/events", "web", ev("web", 2, map[string]any{"type": "identify", "user_id": "u1", "traits": map[string]any{"k0001": "x"}}))
	mustStatus(t, r, 202, "")
	if strings.TrimSpace(string(r.body)) != `{"accepted":1,"duplicates":0,"quarantined":0,"dropped":0}` {
		t.Fatalf("got %s, want the four counts only", r.body)
	}
	if _, got := profileOf(t, h, "web", "u1"); got["k0001"] != "x" {
		t.Fatalf("got k0001 %v, want x", got["k0001"])
	}
}
