package privacy

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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

// Cookieless rewrites ev, which was sent with consent "denied", so that
// nothing in it identifies the visitor across days: user_id and traits are
// removed, url and referrer lose their query string and fragment, and
// anon_id becomes an HMAC of the site and anon id under salt, a secret that
// rotates every UTC day and is then forgotten. The stored raw payload is
// rewritten the same way (its other fields kept), so the original
// identifiers are not kept there either.
func Cookieless(ev *schema.Event, salt []byte) {
	mac := hmac.New(sha256.New, salt)
	mac.Write([]byte(ev.SiteID))
	mac.Write([]byte{0})
	mac.Write([]byte(ev.AnonID))
	ev.AnonID = CookielessPrefix + hex.EncodeToString(mac.Sum(nil))[:cookielessHexLen]
	StripIdentifiers(ev)
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

// StripIdentifiers is Cookieless without the anon_id rewrite, for an event
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
