package privacy

import (
	_ "embed"
	"strings"
	"sync"
)

// Kinds of a known source, which the acquisition channel reads
// (docs/intake.md#source-names). A source of no kind is a referral.
const (
	SourceSearch   = "search"
	SourceSocial   = "social"
	SourceAI       = "ai"
	SourceVideo    = "video"
	SourceShopping = "shopping"
	SourceEmail    = "email"
)

// referrerSources is Matomo's searchengine-and-social-list (CC0 1.0) as
// host, name and kind per line, made by scripts/referrer-sources.py
// (docs/query-api.md#channels).
//
//go:embed referrer_sources.tsv
var referrerSources string

// sourceRenames gives a listed source the name Plausible shows for it, so
// that a Plausible client's filters and saved reports find it.
var sourceRenames = map[string]string{
	"Twitter": "X (Twitter)", "YouTube": "Youtube", "reddit": "Reddit", "Gemini": "Google Gemini",
	"Copilot": "Microsoft Copilot", "Deepseek": "DeepSeek",
}

// moreSources are hosts the list lacks or files elsewhere, with the name
// and kind Plausible gives them (its own additions to its list): they
// take precedence over the list's entries.
var moreSources = [][3]string{
	{"wikipedia.org", "Wikipedia", ""},
	{"officeapps.live.com", "Microsoft 365", ""},
	{"linktr.ee", "Linktree", ""},
	{"teams.microsoft.com", "Microsoft Teams", SourceSocial},
	{"teams.live.com", "Microsoft Teams", SourceSocial},
	{"slack.com", "Slack", SourceSocial},
	{"producthunt.com", "Product Hunt", SourceSocial},
	{"threads.com", "Threads", SourceSocial},
	{"threads.net", "Threads", SourceSocial},
	{"phind.com", "Phind", SourceAI},
	{"grok.com", "Grok", SourceAI},
	{"pplx.ai", "Perplexity", SourceAI},
	{"perplexity.ai", "Perplexity", SourceAI},
	{"copilot.com", "Microsoft Copilot", SourceAI},
	{"copilot.microsoft.com", "Microsoft Copilot", SourceAI},
	{"gemini.google.com", "Google Gemini", SourceAI},
	{"mail.google.com", "Gmail", SourceEmail},
	{"com.google.android.gm", "Gmail", SourceEmail},
	{"youtube.com", "Youtube", SourceVideo},
	{"youtu.be", "Youtube", SourceVideo},
	{"m.youtube.com", "Youtube", SourceVideo},
	{"vimeo.com", "Vimeo", SourceVideo},
	{"twitch.tv", "Twitch", SourceVideo},
	{"dailymotion.com", "Dailymotion", SourceVideo},
}

// utmAliases are utm_source values that name a known source by a
// shorthand (Plausible's resolution of them): matched in lower case.
var utmAliases = map[string]string{
	"ig": "Instagram", "fb": "Facebook", "yt": "Youtube", "twitter": "X (Twitter)",
	"adwords": "Google", "google_ads": "Google", "google-ads": "Google", "googleads": "Google",
	"fb-ads": "Facebook", "fb_ads": "Facebook", "fbad": "Facebook", "fbads": "Facebook",
	"facebook-ads": "Facebook", "facebook_ads": "Facebook", "facebook_ad": "Facebook",
	"yt-ads": "Youtube", "youtube-ads": "Youtube", "reddit-ads": "Reddit", "twitter-ads": "X (Twitter)",
}

type sourceEntry struct{ name, kind string }

type sourceTable struct {
	hosts map[string]sourceEntry // host (or "name.{}": any top-level domain)
	names map[string]string      // lower-case name -> name
	kinds map[string]string      // name -> kind
}

var sources = sync.OnceValue(func() *sourceTable {
	t := &sourceTable{hosts: map[string]sourceEntry{}, names: map[string]string{}, kinds: map[string]string{}}
	add := func(host, name, kind string) {
		if r, ok := sourceRenames[name]; ok {
			name = r
		}
		if _, ok := t.hosts[host]; !ok {
			t.hosts[host] = sourceEntry{name, kind}
		}
		if _, ok := t.kinds[name]; !ok {
			t.kinds[name] = kind
			t.names[strings.ToLower(name)] = name
		}
	}
	for _, s := range moreSources {
		add(s[0], s[1], s[2])
	}
	for _, line := range strings.Split(referrerSources, "\n") {
		f := strings.Split(line, "\t")
		if len(f) == 3 && !strings.HasPrefix(line, "#") {
			add(f[0], f[1], f[2])
		}
	}
	return t
})

// SourceName is the name of the source at a referrer's host ("google.de"
// and "www.google.com" are "Google"): the most specific of the host and
// its parent domains that the list knows, a top-level domain matching
// any; ok is false for a host the list does not know, whose source is the
// host itself (docs/query-api.md#channels).
func SourceName(host string) (name string, ok bool) {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		host = host[:i]
	}
	host = strings.TrimPrefix(host, "www.")
	if host == "" {
		return "", false
	}
	t := sources()
	for c := host; strings.Contains(c, "."); c = c[strings.IndexByte(c, '.')+1:] {
		if e, ok := t.hosts[c]; ok {
			return e.name, true
		}
		// "google.{}": the last one or two labels are any top-level domain,
		// but for the reserved ones no public site has (RFC 2606, 6761):
		// a test's google.test is a host of its own.
		if reservedTLD(c) {
			continue
		}
		for i, n := len(c), 0; n < 2; n++ {
			i = strings.LastIndexByte(c[:i], '.')
			if i <= 0 {
				break
			}
			if e, ok := t.hosts[c[:i]+".{}"]; ok {
				return e.name, true
			}
		}
	}
	return "", false
}

// reservedTLD reports whether host ends in a top-level domain reserved
// for tests, examples and local networks.
func reservedTLD(host string) bool {
	tld := host[strings.LastIndexByte(host, '.')+1:]
	return tld == "test" || tld == "example" || tld == "invalid" || tld == "localhost" || tld == "local" || tld == "internal"
}

// AppSourceName is SourceName for an Android app's id (an
// android-app://ID referrer): the id itself only, as its reversed labels
// are no domain ("com.google.android.gm" is Gmail, not Google).
func AppSourceName(id string) (name string, ok bool) {
	e, ok := sources().hosts[strings.ToLower(id)]
	return e.name, ok
}

// UTMSourceName is the source a utm_source names: a known source's name
// when it is one, in any case ("google" is "Google"), or a shorthand of
// one ("ig" is "Instagram"); ok is false otherwise, when the source is the
// value as sent.
func UTMSourceName(v string) (name string, ok bool) {
	low := strings.ToLower(strings.TrimSpace(v))
	if n, ok := utmAliases[low]; ok {
		return n, true
	}
	n, ok := sources().names[low]
	return n, ok
}

// SourceKind is a source name's kind ("" for a referral or an unknown
// source).
func SourceKind(name string) string { return sources().kinds[name] }

// SourceNames lists the known source names of a kind.
func SourceNames(kind string) []string {
	var list []string
	for n, k := range sources().kinds {
		if k == kind {
			list = append(list, n)
		}
	}
	return list
}
