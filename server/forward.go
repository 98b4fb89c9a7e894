package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// forwardTimeout bounds each re-POST to the collector (DLQ replay, webhooks).
const forwardTimeout = 10 * time.Second

// internalPrefix starts the internal bearer this process uses to re-POST
// events to its own collector. It works in every REQUIRE_API_KEY mode,
// with X-Site-Id naming the site. The secret part is random per process and
// never leaves memory, so it only works when COLLECTOR_URL points at this
// same process. The dot is a character no site id may contain, so no site
// bearer can be mistaken for it (with "internal_", site internal_shop could
// never ingest).
const internalPrefix = "internal."

// internalToken is the per-process secret of the internal bearer.
type internalToken struct {
	token string
	hash  [32]byte
}

func newInternalToken() internalToken {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	t := internalPrefix + hex.EncodeToString(b)
	return internalToken{token: t, hash: sha256.Sum256([]byte(t))}
}

func (it internalToken) matches(bearer string) bool {
	h := sha256.Sum256([]byte(bearer))
	return subtle.ConstantTimeCompare(it.hash[:], h[:]) == 1
}

// forwardResult is what the collector answered a re-POST.
type forwardResult struct {
	status int
	body   []byte
	// answer holds the counts of a 202, dropReasons its Tally-Drop-Reasons.
	answer      intakeAnswer
	dropReasons string
}

// Collector paths a re-POST goes to (and pathSegmentBatch).
const (
	pathEvents = "/events"
	pathS2S    = "/s2s/events"
)

// forward POSTs body to the collector's path (pathEvents or pathS2S) for
// site, authenticated as "Bearer <site id>" (docs/intake.md#dead-letter-queue) in the none
// and tag modes, and with the internal bearer in require mode, where a site bearer
// is refused. A network error (or timeout) is returned as err.
func (s *Server) forward(ctx context.Context, siteID, path string, body []byte, userAgent string) (forwardResult, error) {
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.CollectorURL+path, bytes.NewReader(body))
	if err != nil {
		return forwardResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if s.cfg.RequireAPIKey == KeyModeRequire {
		req.Header.Set("Authorization", "Bearer "+s.internal.token)
		req.Header.Set("X-Site-Id", siteID)
	} else {
		req.Header.Set("Authorization", "Bearer "+siteID)
	}
	if userAgent == "" {
		userAgent = "tally-forward/1"
	}
	req.Header.Set("User-Agent", userAgent)
	res, err := s.client.Do(req)
	if err != nil {
		return forwardResult{}, err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	fr := forwardResult{status: res.StatusCode, body: b}
	if fr.status == http.StatusAccepted || fr.status == http.StatusOK {
		// A 202 (the Segment intake's 200) without counts stores nothing as far as the forwarder can tell.
		json.Unmarshal(b, &fr.answer)
		fr.dropReasons = res.Header.Get(dropReasonsHeader)
	}
	return fr, nil
}

// stored reports whether the one event a 202 answered is in events: newly
// accepted, or a duplicate of a stored one. Dropped or quarantined, it is not.
func (fr forwardResult) stored() bool {
	return fr.answer.Accepted+fr.answer.Duplicates > 0
}

// fate says what the collector did with an event it answered 202 but did not
// store, for an error message.
func (fr forwardResult) fate() string {
	switch {
	case fr.answer.Quarantined > 0:
		return "quarantined it in the DLQ (it fails the tracking plan)"
	case fr.answer.Dropped > 0 && fr.dropReasons != "":
		return "dropped it (" + fr.dropReasons + ")"
	case fr.answer.Dropped > 0:
		return "dropped it"
	default:
		return "did not store it"
	}
}

// describe summarises a collector answer for an error message.
func (fr forwardResult) describe() string {
	var env struct {
		Error struct{ Code, Message string }
	}
	if json.Unmarshal(fr.body, &env) == nil && env.Error.Code != "" {
		return fmt.Sprintf("%d %s: %s", fr.status, env.Error.Code, env.Error.Message)
	}
	return fmt.Sprintf("%d", fr.status)
}
