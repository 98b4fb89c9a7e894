package sdktest_test

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tally-analytics/tally/server/servertest"
)

// segmentMessage is what the tests read of a message an SDK sent.
type segmentMessage struct {
	Type        string `json:"type"`
	Event       string `json:"event"`
	MessageID   string `json:"messageId"`
	AnonymousID string `json:"anonymousId"`
	UserID      string `json:"userId"`
	PreviousID  string `json:"previousId"`
	Timestamp   string `json:"timestamp"`
	Properties  struct {
		URL      string `json:"url"`
		Referrer string `json:"referrer"`
	} `json:"properties"`
	Context struct {
		Page struct {
			URL      string `json:"url"`
			Referrer string `json:"referrer"`
		} `json:"page"`
		UserAgent string `json:"userAgent"`
	} `json:"context"`
}

// sent is one message as it went over the wire: its exact bytes and what
// they say.
type sent struct {
	raw json.RawMessage
	msg segmentMessage
}

func parseSent(t *testing.T, raw json.RawMessage) sent {
	t.Helper()
	var m segmentMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("a message the SDK sent: %v in %s", err, raw)
	}
	return sent{raw: raw, msg: m}
}

// storedRaw is what the collector keeps of a message as raw: its exact
// bytes less the writeKey member (a credential), which the SDKs put in
// every message (browser) or in the batch (node).
func storedRaw(raw json.RawMessage, writeKey string) []byte {
	member := []byte(`"writeKey":` + strconv.Quote(writeKey))
	if out := bytes.Replace(raw, append(append([]byte{}, member...), ','), nil, 1); len(out) < len(raw) {
		return out
	}
	return bytes.Replace(raw, append([]byte{','}, member...), nil, 1)
}

// checkMapping finds the stored event of every messageId (a resend is a
// duplicate, and requests may arrive in any order, so it may be any send's)
// by its exact bytes, and checks the mapping from Segment messages to
// events of docs/intake.md#segment-compatible-intake. It returns the stored events by messageId.
func checkMapping(t *testing.T, writeKey string, messages []sent, events []servertest.Event) map[string]servertest.Event {
	t.Helper()
	byMessage := map[string]servertest.Event{}
	for _, e := range events {
		if bytes.Contains(e.Raw, []byte(`"writeKey"`)) {
			t.Errorf("event %s: raw keeps the write key: %s", e.ID, e.Raw)
		}
	}
	for _, s := range messages {
		m := s.msg
		if _, seen := byMessage[m.MessageID]; seen {
			continue
		}
		var found *servertest.Event
		for _, other := range messages {
			if other.msg.MessageID != m.MessageID {
				continue
			}
			for i := range events {
				if bytes.Equal(events[i].Raw, storedRaw(other.raw, writeKey)) {
					found, s = &events[i], other
				}
			}
		}
		if found == nil {
			t.Errorf("message %s (%s): no stored event has its exact bytes (less writeKey) as raw: %s", m.MessageID, m.Type, s.raw)
			continue
		}
		m = s.msg
		e := *found
		byMessage[m.MessageID] = e

		wantType := m.Type
		switch m.Type {
		case "track":
			wantType = m.Event
		case "page":
			wantType = "pageview"
		}
		if e.Type != wantType {
			t.Errorf("message %s: got type %q, want %q", m.MessageID, e.Type, wantType)
		}
		wantAnon := m.AnonymousID
		switch {
		case m.Type == "alias":
			// An alias is stored as an event of the id it links to the user.
			wantAnon = m.PreviousID
		case wantAnon == "":
			wantAnon = m.UserID
		}
		if e.AnonID != wantAnon {
			t.Errorf("message %s: got anon_id %q, want %q", m.MessageID, e.AnonID, wantAnon)
		}
		if deref(e.UserID) != m.UserID {
			t.Errorf("message %s: got user_id %q, want %q", m.MessageID, deref(e.UserID), m.UserID)
		}
		wantURL, wantRef := m.Properties.URL, m.Properties.Referrer
		if wantURL == "" {
			wantURL = m.Context.Page.URL
		}
		if wantRef == "" {
			wantRef = m.Context.Page.Referrer
		}
		if deref(e.URL) != wantURL || deref(e.Referrer) != wantRef {
			t.Errorf("message %s: got url %q referrer %q, want %q %q", m.MessageID, deref(e.URL), deref(e.Referrer), wantURL, wantRef)
		}
		if id, err := uuid.Parse(m.MessageID); err == nil {
			if e.ID != id.String() {
				t.Errorf("message %s: got id %q, want the messageId", m.MessageID, e.ID)
			}
		} else if _, err := uuid.Parse(e.ID); err != nil || e.ID == m.MessageID {
			t.Errorf("message %s: got id %q, want a name-based UUID of the messageId", m.MessageID, e.ID)
		}
		// The SDK's and the server's clocks are one clock here, so the
		// sentAt correction leaves the SDK's timestamp (to the millisecond
		// the server keeps) within a second.
		sentTS, err1 := time.Parse(time.RFC3339Nano, m.Timestamp)
		storedTS, err2 := time.Parse(time.RFC3339Nano, e.TS)
		if err1 != nil || err2 != nil || storedTS.Sub(sentTS).Abs() > time.Second {
			t.Errorf("message %s: got ts %q, want about the SDK's timestamp %q", m.MessageID, e.TS, m.Timestamp)
		}
	}
	return byMessage
}

// subjectExport is the part of a GDPR export the tests read.
type subjectExport struct {
	Counts struct {
		Events int64 `json:"events"`
	} `json:"counts"`
	Events []struct {
		ID  string          `json:"id"`
		Raw json.RawMessage `json:"raw"`
	} `json:"events"`
	UserProfiles []struct {
		UserID string         `json:"user_id"`
		Traits map[string]any `json:"traits"`
	} `json:"user_profiles"`
	IdentityLinks []struct {
		AnonID string `json:"anon_id"`
		UserID string `json:"user_id"`
	} `json:"identity_links"`
}

// timeline is the part of a user's timeline the tests read.
type timeline struct {
	Events []struct {
		ID      string  `json:"id"`
		Type    string  `json:"type"`
		URL     *string `json:"url"`
		AnonID  string  `json:"anon_id"`
		Browser *string `json:"browser"`
	} `json:"events"`
}

// eventCounts is GET /sites/:siteId/events.
type eventCounts struct {
	ByName []struct {
		Name  string `json:"name"`
		Count int64  `json:"count"`
	} `json:"by_name"`
}

func (c eventCounts) of(name string) int64 {
	for _, n := range c.ByName {
		if n.Name == name {
			return n.Count
		}
	}
	return 0
}

// breakdown is GET /v1/sites/:siteId/breakdown.
type breakdown struct {
	Rows []struct {
		Value *string `json:"value"`
		Count int64   `json:"count"`
	} `json:"rows"`
}

func (b breakdown) of(value string) int64 {
	for _, r := range b.Rows {
		if deref(r.Value) == value {
			return r.Count
		}
	}
	return 0
}

func (x subjectExport) linked(anon, user string) bool {
	for _, l := range x.IdentityLinks {
		if l.AnonID == anon && l.UserID == user {
			return true
		}
	}
	return false
}
