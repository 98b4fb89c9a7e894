package privacy

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/netip"
	"net/url"
	"strings"

	"github.com/tally-analytics/tally/schema"
)

// Consent modes of the collector (CONSENT_MODE).
const (
	// ConsentCookieless keeps events without consent in cookieless form.
	ConsentCookieless = "cookieless"
	// ConsentRequire drops every event that does not carry consent "granted".
	ConsentRequire = "require"
)

// ValidConsentMode reports whether mode is one of the CONSENT_MODE modes.
func ValidConsentMode(mode string) bool {
	return mode == ConsentCookieless || mode == ConsentRequire
}

// CookielessPrefix starts every anon id made by Cookieless, so such ids
// are recognisable in the data.
const CookielessPrefix = "c_"

// Visitor is what the collector knows of a consent-denied event's visitor,
// which its cookieless id is made of: the client address and User-Agent
// (docs/intake.md#gates-in-order, gate 5). A zero Addr means the collector
// knows no address of the visitor (server-to-server intake), and the id is made
// of the event's own anon_id instead.
type Visitor struct {
	Addr      netip.Addr
	UserAgent string
}

// Cookieless rewrites ev, which was sent with consent "denied", so that
// nothing in it identifies the visitor across days: user_id and traits are
// removed, url and referrer lose their query string and fragment, and
// anon_id becomes CookielessID. The stored raw payload is rewritten the
// same way (its other fields kept), so the original identifiers are not
// kept there either.
func Cookieless(ev *schema.Event, salt []byte, v Visitor) {
	ev.AnonID = CookielessID(salt, ev.SiteID, ev.AnonID, v)
	StripIdentifiers(ev)
}

// CookielessID is the anon id of a consent-denied event: an HMAC under
// salt, a secret that rotates every UTC day and is then forgotten, of the
// site and the visitor's address and User-Agent, as Plausible counts
// visitors without cookies. So every page load of one browser on one day
// is one visitor, whatever anon id its page made up, and no id links a
// visitor across days. Without an address it is an HMAC of the site and
// anon, the sender's own id.
func CookielessID(salt []byte, site, anon string, v Visitor) string {
	mac := hmac.New(sha256.New, salt)
	mac.Write([]byte(site))
	mac.Write([]byte{0})
	if v.Addr.IsValid() {
		// 0xff starts no UTF-8 string, so no anon id can hash as an
		// address does.
		mac.Write([]byte{0xff})
		mac.Write([]byte(v.Addr.Unmap().WithZone("").String()))
		mac.Write([]byte{0})
		mac.Write([]byte(v.UserAgent))
	} else {
		mac.Write([]byte(anon))
	}
	return CookielessPrefix + hex.EncodeToString(mac.Sum(nil))[:cookielessHexLen]
}

// cookielessHexLen is the number of hex digits after CookielessPrefix.
const cookielessHexLen = 32

// IsCookielessID reports whether anon has the shape of an anon id made by
// Cookieless (it cannot tell whether Cookieless made it).
func IsCookielessID(anon string) bool {
	if len(anon) != len(CookielessPrefix)+cookielessHexLen || !strings.HasPrefix(anon, CookielessPrefix) {
		return false
	}
	for _, c := range anon[len(CookielessPrefix):] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// StripIdentifiers removes an event's identifiers: user_id and traits, the
// query strings of url and referrer, and what a context object holds
// beside the description of the browser or app (CookielessContext). It is
// Cookieless without the anon_id rewrite, for an event
// whose anon_id is already a cookieless one: a DLQ replay of an event
// quarantined in cookieless form. On an event Cookieless already rewrote
// it changes nothing, Raw included.
func StripIdentifiers(ev *schema.Event) {
	ev.UserID = nil
	ev.Traits = nil
	if ev.URL != nil {
		u := StripQuery(*ev.URL)
		ev.URL = &u
	}
	if ev.Referrer != nil {
		r := StripQuery(*ev.Referrer)
		ev.Referrer = &r
	}

	fields := make(map[string]json.RawMessage, len(ev.Fields))
	for k, v := range ev.Fields {
		fields[k] = v
	}
	delete(fields, "user_id")
	delete(fields, "traits")
	if c, ok := fields["context"]; ok {
		fields["context"] = CookielessContext(c)
	}
	fields["anon_id"], _ = json.Marshal(ev.AnonID)
	if ev.URL != nil {
		fields["url"], _ = json.Marshal(*ev.URL)
	}
	if ev.Referrer != nil {
		fields["referrer"], _ = json.Marshal(*ev.Referrer)
	}
	ev.Fields = fields
	ev.Raw, _ = json.Marshal(fields)
}

// StripQuery removes the query string and fragment of a URL (or of any
// string shaped like one).
func StripQuery(s string) string {
	if u, err := url.Parse(s); err == nil {
		u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = "", false, "", ""
		return u.String()
	}
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		return s[:i]
	}
	return s
}
