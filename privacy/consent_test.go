package privacy

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/tally-analytics/tally/schema"
)

func TestCookieless(t *testing.T) {
	body := `{"id":"3f2504e0-4f89-41d3-9a0c-0305e82c3301","site_id":"web","anon_id":"visitor-1","type":"pageview",
		"user_id":"alice@example.com","traits":{"email":"alice@example.com"},"consent":"denied",
		"url":"https://shop.example/cart?token=secret#frag","referrer":"https://mail.example/?u=alice","properties":{"plan":"pro"},"extra":1}`
	parse := func() *schema.Event {
		evs, err := schema.Parse([]byte(body), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return &evs[0]
	}
	day1, day2 := []byte("salt-of-day-1"), []byte("salt-of-day-2")
	a, b, c := parse(), parse(), parse()
	Cookieless(a, day1, Visitor{})
	Cookieless(b, day1, Visitor{})
	Cookieless(c, day2, Visitor{})
	if a.AnonID != b.AnonID {
		t.Errorf("same visitor, same day: got %s and %s, want equal ids", a.AnonID, b.AnonID)
	}
	if a.AnonID == c.AnonID {
		t.Errorf("same visitor, next day: got equal ids %s, want them unlinkable", a.AnonID)
	}
	if !strings.HasPrefix(a.AnonID, CookielessPrefix) || len(a.AnonID) != 34 {
		t.Errorf("got anon id %q", a.AnonID)
	}
	if a.UserID != nil || a.Traits != nil {
		t.Errorf("got user_id %v traits %s, want both removed", a.UserID, a.Traits)
	}
	if *a.URL != "https://shop.example/cart" || *a.Referrer != "https://mail.example/" {
		t.Errorf("got url %q referrer %q, want no query or fragment", *a.URL, *a.Referrer)
	}
	for _, secret := range []string{"alice", "visitor-1", "token", "secret"} {
		if strings.Contains(string(a.Raw), secret) {
			t.Errorf("raw still holds %q: %s", secret, a.Raw)
		}
	}
	var raw map[string]any
	if err := json.Unmarshal(a.Raw, &raw); err != nil {
		t.Fatal(err)
	}
	if raw["extra"] != float64(1) || raw["properties"] == nil || raw["consent"] != "denied" || raw["anon_id"] != a.AnonID {
		t.Errorf("raw lost fields it should keep: %s", a.Raw)
	}

	// A replay of the cookieless form (what the DLQ keeps) is stripped
	// again, which changes nothing: neither its anon_id nor its raw bytes.
	evs, err := schema.Parse(a.Raw, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	again := &evs[0]
	StripIdentifiers(again)
	if again.AnonID != a.AnonID || string(again.Raw) != string(a.Raw) {
		t.Errorf("StripIdentifiers of the cookieless form: got %s %s, want %s %s", again.AnonID, again.Raw, a.AnonID, a.Raw)
	}
	if !IsCookielessID(a.AnonID) {
		t.Errorf("IsCookielessID(%q): got false, want true", a.AnonID)
	}
}

// The id of a visitor whose address is known is made of site, address and
// User-Agent under the day's salt, whatever anon id the event carries.
func TestCookielessIDByAddress(t *testing.T) {
	day1, day2 := []byte("salt-of-day-1"), []byte("salt-of-day-2")
	addr, other := netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("203.0.113.8")
	const chrome, firefox = "Mozilla/5.0 Chrome/120.0", "Mozilla/5.0 Firefox/121.0"
	base := CookielessID(day1, "web", "page-load-1", Visitor{Addr: addr, UserAgent: chrome})
	tests := []struct {
		name      string
		salt      []byte
		site      string
		anon      string
		v         Visitor
		wantEqual bool
	}{
		{"another page load of the same browser", day1, "web", "page-load-2", Visitor{Addr: addr, UserAgent: chrome}, true},
		{"the address as IPv4-mapped IPv6", day1, "web", "page-load-3", Visitor{Addr: netip.AddrFrom16(addr.As16()), UserAgent: chrome}, true},
		{"another User-Agent", day1, "web", "page-load-1", Visitor{Addr: addr, UserAgent: firefox}, false},
		{"another address", day1, "web", "page-load-1", Visitor{Addr: other, UserAgent: chrome}, false},
		{"the next day", day2, "web", "page-load-1", Visitor{Addr: addr, UserAgent: chrome}, false},
		{"another site", day1, "shop", "page-load-1", Visitor{Addr: addr, UserAgent: chrome}, false},
		{"no address: the anon id", day1, "web", "page-load-1", Visitor{UserAgent: chrome}, false},
	}
	for _, tt := range tests {
		got := CookielessID(tt.salt, tt.site, tt.anon, tt.v)
		if (got == base) != tt.wantEqual || !IsCookielessID(got) {
			t.Errorf("%s: got %s (base %s), want equal %v and a cookieless id", tt.name, got, base, tt.wantEqual)
		}
	}
	// Without an address, the anon id tells visitors apart.
	if a, b := CookielessID(day1, "web", "a", Visitor{}), CookielessID(day1, "web", "b", Visitor{}); a == b {
		t.Errorf("no address, two anon ids: got one id %s, want two", a)
	}
}

func TestIsCookielessID(t *testing.T) {
	for in, want := range map[string]bool{
		"c_0123456789abcdef0123456789abcdef":  true,
		"c_0123456789ABCDEF0123456789abcdef":  false,
		"c_0123456789abcdef0123456789abcde":   false,
		"c_0123456789abcdef0123456789abcdef0": false,
		"x_0123456789abcdef0123456789abcdef":  false,
		"visitor-1":                           false,
		"":                                    false,
	} {
		if got := IsCookielessID(in); got != want {
			t.Errorf("IsCookielessID(%q): got %v, want %v", in, got, want)
		}
	}
}

func TestStripQuery(t *testing.T) {
	for in, want := range map[string]string{
		"https://a.example/p?q=1#f": "https://a.example/p",
		"/relative/path?x=y":        "/relative/path",
		"https://a.example/":        "https://a.example/",
		"not a url %zz?q":           "not a url %zz",
		"":                          "",
	} {
		if got := StripQuery(in); got != want {
			t.Errorf("StripQuery(%q): got %q, want %q", in, got, want)
		}
	}
}

// The cookieless form's context is an allow-list, and applying it again
// (a DLQ replay of the cookieless form) changes nothing.
func TestCookielessContextIsStable(t *testing.T) {
	ctx := json.RawMessage(`{"device":{"id":"d-1","model":"m"},"externalIds":[{"id":"e-1"}],"page":{"url":"https://a.test/p?q=1","search":"?q=1"},"locale":"de-DE"}`)
	once := CookielessContext(ctx)
	if want := `{"device":{"model":"m"},"locale":"de-DE","page":{"url":"https://a.test/p"}}`; string(once) != want {
		t.Errorf("got %s, want %s", once, want)
	}
	if twice := CookielessContext(once); string(twice) != string(once) {
		t.Errorf("again: got %s, want %s", twice, once)
	}
}
