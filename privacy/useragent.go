// Package privacy holds everything that touches personal signals at the
// edge: a User-Agent is reduced to coarse families, an IP address to a
// country and city (the address itself is never stored or logged), events
// without consent are turned into a cookieless form, and (in later parts)
// GDPR export and erasure.
package privacy

import (
	"regexp"
	"strings"
	"sync"

	useragent "github.com/medama-io/go-useragent"
	"github.com/medama-io/go-useragent/agents"
)

// Device types stored with events.
const (
	DeviceDesktop = "desktop"
	DeviceMobile  = "mobile"
	DeviceTablet  = "tablet"
	DeviceOther   = "other"
)

// Settings of the bot filter (BOT_FILTER).
const (
	// BotFilterOn drops the events of bots.
	BotFilterOn = "on"
	// BotFilterOff lets them through, marked as bots in the inspection
	// feed: tests driving headless browsers send such events.
	BotFilterOff = "off"
)

// ValidBotFilter reports whether v is one of the BOT_FILTER settings.
func ValidBotFilter(v string) bool { return v == BotFilterOn || v == BotFilterOff }

// Agent is what the service keeps of a User-Agent: family names only.
type Agent struct {
	Bot        bool
	Browser    string // "" when unknown
	OS         string // "" when unknown
	DeviceType string // "" when there is no User-Agent at all
	// BrowserVersion and OSVersion are Plausible's versions: the browser's
	// major.minor ("120.0"), the OS's release ("10" for Windows 10 and 11,
	// "10.15" for macOS, "17.1" for iOS, "14" for Android); "" when unknown
	// (docs/query-api.md#value-names).
	BrowserVersion, OSVersion string
}

// The parser builds a trie of its embedded list once (about 30 ms); it is
// safe for concurrent use.
var parser = sync.OnceValue(useragent.NewParser)

// botWords catch the generic crawler names the parser's list leaves out
// ("YandexSpider", "Screaming Frog SEO Spider", "ia_archiver", "PhantomJS").
var botWords = []string{"bot", "spider", "crawl", "headless", "phantomjs", "archiver", "scraper", "slurp"}

// httpLibraries start the User-Agents of HTTP client libraries and tools.
// The parser's list counts them as bots, but on an analytics collector they
// are SDKs, servers and test suites sending real events, so they pass the
// bot gate unless they also carry a crawler word.
var httpLibraries = []string{"curl/", "wget/", "python-requests/", "python-urllib/", "python-httpx/", "python/",
	"aiohttp/", "pycurl/", "go-http-client/", "okhttp/", "axios/", "node-fetch/", "node/", "undici",
	"java/", "ruby", "dart/", "php/", "guzzlehttp/", "httpie/", "libwww-perl/", "deno/", "bun/", "faraday"}

// agentCacheSize bounds the memo of recent User-Agents; most traffic
// comes from a few hundred distinct strings.
const agentCacheSize = 4096

// agentCacheMaxLen keeps longer strings (sent by no real browser) out of
// the memo, so that a client cannot fill memory with them: the memo holds
// at most about 2 MB.
const agentCacheMaxLen = 512

// agentMemo memoizes ParseAgent: the trie walk and the word scans cost a few
// microseconds, paid twice per event (bot gate, then enrichment) and once
// per event of a batch.
var agentMemo = struct {
	sync.Mutex
	m map[string]Agent
}{m: make(map[string]Agent)}

// ParseAgent classifies a User-Agent string. A missing User-Agent is not a
// bot (docs/intake.md#gates-in-order) and has no device type.
func ParseAgent(s string) Agent {
	if len(s) > agentCacheMaxLen {
		return parseAgent(s)
	}
	agentMemo.Lock()
	a, ok := agentMemo.m[s]
	agentMemo.Unlock()
	if ok {
		return a
	}
	a = parseAgent(s)
	agentMemo.Lock()
	if len(agentMemo.m) >= agentCacheSize {
		clear(agentMemo.m) // cheaper than tracking recency; refills at once
	}
	agentMemo.m[s] = a
	agentMemo.Unlock()
	return a
}

func parseAgent(s string) Agent {
	if strings.TrimSpace(s) == "" {
		return Agent{}
	}
	ua := parser().Parse(s)
	a := Agent{Bot: ua.IsBot(), Browser: string(ua.Browser()), OS: osName(ua.OS())}
	if major := ua.BrowserVersionMajor(); major != "" && a.Browser != "" {
		minor := ua.BrowserVersionMinor()
		if minor == "" {
			minor = "0"
		}
		a.BrowserVersion = major + "." + minor
	}
	a.OSVersion = osVersion(ua.OS(), s)
	lower := strings.ToLower(s)
	crawler := false
	for _, w := range botWords {
		if strings.Contains(lower, w) {
			crawler = true
			break
		}
	}
	switch {
	case crawler:
		a.Bot = true
	case a.Bot:
		for _, lib := range httpLibraries {
			if strings.HasPrefix(lower, lib) {
				a.Bot = false
				break
			}
		}
	}
	switch ua.Device() {
	case agents.DeviceDesktop:
		a.DeviceType = DeviceDesktop
	case agents.DeviceMobile:
		a.DeviceType = DeviceMobile
	case agents.DeviceTablet:
		a.DeviceType = DeviceTablet
	default:
		a.DeviceType = DeviceOther
	}
	if a.Browser == string(agents.BrowserSafari) && a.DeviceType == DeviceMobile {
		a.Browser = "Mobile Safari"
	}
	return a
}

// osName maps the parser's names to the contract's family names.
func osName(os agents.OS) string {
	if os == agents.OSMacOS {
		return "macOS"
	}
	return string(os)
}

// The patterns find an OS's release in a User-Agent; windowsReleases
// name Windows NT's (Windows 11 still sends NT 10.0).
var (
	windowsVersion  = regexp.MustCompile(`Windows NT (\d+\.\d+)`)
	iosVersion      = regexp.MustCompile(`(?:iPhone|CPU) OS (\d+)_(\d+)`)
	macVersion      = regexp.MustCompile(`Mac OS X (\d+)[._](\d+)`)
	androidVersion  = regexp.MustCompile(`Android (\d+(?:\.\d+)?)`)
	windowsReleases = map[string]string{"10.0": "10", "6.3": "8.1", "6.2": "8", "6.1": "7", "6.0": "Vista", "5.1": "XP", "5.2": "XP"}
)

// osVersion is the release of os that User-Agent s states, "" when it
// states none.
func osVersion(os agents.OS, s string) string {
	switch os {
	case agents.OSWindows:
		if m := windowsVersion.FindStringSubmatch(s); m != nil {
			return windowsReleases[m[1]]
		}
	case agents.OSIOS:
		if m := iosVersion.FindStringSubmatch(s); m != nil {
			return m[1] + "." + m[2]
		}
	case agents.OSMacOS:
		if m := macVersion.FindStringSubmatch(s); m != nil {
			return m[1] + "." + m[2]
		}
	case agents.OSAndroid:
		if m := androidVersion.FindStringSubmatch(s); m != nil {
			return m[1]
		}
	}
	return ""
}
