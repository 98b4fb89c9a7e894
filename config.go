package main

import (
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/tally-analytics/tally/privacy"
	"github.com/tally-analytics/tally/server"
	"github.com/tally-analytics/tally/storage"
)

// config is every setting of README "Configuration". Each is read from its
// environment variable, and a flag of the same name in kebab case
// (--database-path) overrides it.
type config struct {
	DatabasePath     string
	CollectorAddr    string
	QueryAddr        string
	CollectorURL     string
	AdminToken       string
	RequireAPIKey    string
	SchemaBundlePath string
	IngestRateLimit  int
	IngestQuota      int
	RetentionDays    int
	ConsentMode      string
	BotFilter        string
	GeoIPDBPath      string
	TrustProxy       bool
	Dev              bool
	DevJSON          bool
	DevAllowRemote   bool
	DebugFeedSize    int
	Durability       storage.Durability

	// Sourcemap uploads per minute per site, and what a site may store.
	SourcemapUploadRate int
	SourcemapMaxFiles   int
	SourcemapMaxMiB     int
}

func loadConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	var c config
	var retention string
	var rate, quota, trust, feed, smRate, smFiles, smMiB, durability string
	fs := flag.NewFlagSet("tally", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.DatabasePath, "database-path", env("DATABASE_PATH", "./data/analytics.db"), "SQLite file (`:memory:` for a throw-away database) [DATABASE_PATH]")
	fs.StringVar(&c.CollectorAddr, "collector-addr", env("COLLECTOR_ADDR", ":8080"), "collector listen address [COLLECTOR_ADDR]")
	fs.StringVar(&c.QueryAddr, "query-addr", env("QUERY_ADDR", ":8081"), "query API listen address [QUERY_ADDR]")
	fs.StringVar(&c.CollectorURL, "collector-url", env("COLLECTOR_URL", ""), "where DLQ replay and webhooks re-POST events (default http://127.0.0.1:<collector port>) [COLLECTOR_URL]")
	fs.StringVar(&c.AdminToken, "admin-token", env("ADMIN_TOKEN", ""), "operator token; prefer the environment variable, flags show in ps [ADMIN_TOKEN]")
	fs.StringVar(&c.RequireAPIKey, "require-api-key", env("REQUIRE_API_KEY", server.KeyModeNone), "collector auth: none, tag or require [REQUIRE_API_KEY]")
	fs.StringVar(&c.SchemaBundlePath, "schema-bundle-path", env("SCHEMA_BUNDLE_PATH", ""), "tracking plan file; unset disables schema validation [SCHEMA_BUNDLE_PATH]")
	fs.StringVar(&rate, "ingest-rate-limit", env("INGEST_RATE_LIMIT", "1000"), "events per second per site, 0 = off [INGEST_RATE_LIMIT]")
	fs.StringVar(&quota, "ingest-quota", env("INGEST_QUOTA", "0"), "accepted events per site per UTC month, 0 = unlimited [INGEST_QUOTA]")
	fs.StringVar(&retention, "retention-days", env("RETENTION_DAYS", "0"), "UTC days of raw events kept, today included (rollups stay), 0 = keep everything [RETENTION_DAYS]")
	fs.StringVar(&smRate, "sourcemap-upload-rate", env("SOURCEMAP_UPLOAD_RATE", "30"), "sourcemap uploads per minute per site, 0 = off [SOURCEMAP_UPLOAD_RATE]")
	fs.StringVar(&smFiles, "sourcemap-max-files", env("SOURCEMAP_MAX_FILES", "100"), "sourcemap files a site may store, 0 = no cap [SOURCEMAP_MAX_FILES]")
	fs.StringVar(&smMiB, "sourcemap-max-mib", env("SOURCEMAP_MAX_MIB", "256"), "MiB of sourcemaps (decoded) a site may store, 0 = no cap [SOURCEMAP_MAX_MIB]")
	fs.StringVar(&c.ConsentMode, "consent-mode", env("CONSENT_MODE", privacy.ConsentCookieless), "events without consent: cookieless (kept without identifiers) or require (dropped) [CONSENT_MODE]")
	fs.StringVar(&c.GeoIPDBPath, "geoip-db-path", env("GEOIP_DB_PATH", ""), "MaxMind-format city database for country and city [GEOIP_DB_PATH]")
	fs.StringVar(&trust, "trust-proxy-headers", env("TRUST_PROXY_HEADERS", "false"), "believe X-Forwarded-For and CDN country/city headers [TRUST_PROXY_HEADERS]")
	fs.StringVar(&durability, "durability", env("DURABILITY", string(storage.DurabilityPower)), "what a 202 survives: power (fsync per commit: power loss and OS crash) or process (process crash only, faster single events) [DURABILITY]")
	fs.StringVar(&c.BotFilter, "bot-filter", env("BOT_FILTER", ""), "events of bots: on (dropped) or off (stored, marked in the inspection feed); default off in dev mode, else on [BOT_FILTER]")
	envBool := func(name string) bool { b, _ := strconv.ParseBool(getenv(name)); return b }
	fs.BoolVar(&c.Dev, "dev", envBool("DEV"), "dev mode: in-memory database, generated admin token, a ready workspace, site and keys, inspection feed [DEV]")
	fs.BoolVar(&c.DevJSON, "dev-json", envBool("DEV_JSON"), "dev mode, printing the setup as one JSON line on standard output [DEV_JSON]")
	allowRemote, err := strconv.ParseBool(env("DEV_ALLOW_REMOTE", "false"))
	if err != nil {
		return c, fmt.Errorf("DEV_ALLOW_REMOTE must be true or false, not %q", getenv("DEV_ALLOW_REMOTE"))
	}
	fs.BoolVar(&c.DevAllowRemote, "dev-allow-remote", allowRemote, "dev mode: allow a non-loopback listen address, where anyone who reaches it can read and wipe the dev data [DEV_ALLOW_REMOTE]")
	fs.StringVar(&feed, "debug-feed-size", env("DEBUG_FEED_SIZE", "10000"), "dev mode: decisions kept by the inspection feed [DEBUG_FEED_SIZE]")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if !server.ValidKeyMode(c.RequireAPIKey) {
		return c, fmt.Errorf("REQUIRE_API_KEY must be %s, %s or %s, not %q", server.KeyModeNone, server.KeyModeTag, server.KeyModeRequire, c.RequireAPIKey)
	}
	if c.IngestRateLimit, err = nonNegative("INGEST_RATE_LIMIT", rate); err != nil {
		return c, err
	}
	if c.IngestQuota, err = nonNegative("INGEST_QUOTA", quota); err != nil {
		return c, err
	}
	if c.RetentionDays, err = nonNegative("RETENTION_DAYS", retention); err != nil {
		return c, err
	}
	if c.RetentionDays > storage.MaxRetentionDays {
		return c, fmt.Errorf("RETENTION_DAYS must be at most %d, not %q", storage.MaxRetentionDays, retention)
	}
	if c.SourcemapUploadRate, err = nonNegative("SOURCEMAP_UPLOAD_RATE", smRate); err != nil {
		return c, err
	}
	if c.SourcemapMaxFiles, err = nonNegative("SOURCEMAP_MAX_FILES", smFiles); err != nil {
		return c, err
	}
	if c.SourcemapMaxMiB, err = nonNegative("SOURCEMAP_MAX_MIB", smMiB); err != nil {
		return c, err
	}
	if c.SourcemapMaxMiB > maxSourcemapMiB {
		return c, fmt.Errorf("SOURCEMAP_MAX_MIB must be at most %d (1 TiB), not %q", maxSourcemapMiB, smMiB)
	}
	if !privacy.ValidConsentMode(c.ConsentMode) {
		return c, fmt.Errorf("CONSENT_MODE must be %s or %s, not %q", privacy.ConsentCookieless, privacy.ConsentRequire, c.ConsentMode)
	}
	if c.BotFilter != "" && !privacy.ValidBotFilter(c.BotFilter) {
		return c, fmt.Errorf("BOT_FILTER must be %s or %s, not %q", privacy.BotFilterOn, privacy.BotFilterOff, c.BotFilter)
	}
	if c.TrustProxy, err = strconv.ParseBool(trust); err != nil {
		return c, fmt.Errorf("TRUST_PROXY_HEADERS must be true or false, not %q", trust)
	}
	if c.DebugFeedSize, err = nonNegative("DEBUG_FEED_SIZE", feed); err != nil {
		return c, err
	}
	if c.Durability, err = storage.ParseDurability(durability); err != nil {
		return c, err
	}
	if c.DevJSON {
		c.Dev = true
	}
	if c.Dev {
		// Dev defaults apply to every setting the caller left unset.
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		unset := func(flagName, envName string) bool { return !set[flagName] && getenv(envName) == "" }
		if unset("database-path", "DATABASE_PATH") {
			c.DatabasePath = ":memory:"
		}
		if unset("collector-addr", "COLLECTOR_ADDR") {
			c.CollectorAddr = "127.0.0.1:8080"
		}
		if unset("query-addr", "QUERY_ADDR") {
			c.QueryAddr = "127.0.0.1:8081"
		}
		if unset("ingest-rate-limit", "INGEST_RATE_LIMIT") {
			c.IngestRateLimit = 0
		}
		if unset("sourcemap-upload-rate", "SOURCEMAP_UPLOAD_RATE") {
			c.SourcemapUploadRate = 0
		}
		if unset("admin-token", "ADMIN_TOKEN") {
			c.AdminToken = "dev_" + randomHex(16)
		}
		if name, addr := c.remoteListener(); name != "" && !c.DevAllowRemote {
			return c, fmt.Errorf("dev mode listens only on loopback, as its debug endpoints read and wipe data without a credential: "+
				"%s is %q; use 127.0.0.1:<port>, or set DEV_ALLOW_REMOTE=true (--dev-allow-remote) to expose it anyway", name, addr)
		}
	} else {
		c.DebugFeedSize = 0 // the inspection feed exists only in dev mode
	}
	if c.BotFilter == "" {
		// Dev mode serves tests, whose headless browsers look like bots.
		c.BotFilter = privacy.BotFilterOn
		if c.Dev {
			c.BotFilter = privacy.BotFilterOff
		}
	}
	c.CollectorURL = strings.TrimRight(c.CollectorURL, "/")
	return c, nil
}

// maxSourcemapMiB bounds SOURCEMAP_MAX_MIB (1 TiB), far beyond any real
// need and far from overflowing a byte count.
const maxSourcemapMiB = 1 << 20

// remoteListener names the first listener whose address is not loopback
// (an empty host listens on every interface), or "" when both are.
func (c config) remoteListener() (name, addr string) {
	for _, l := range []struct{ name, addr string }{{"COLLECTOR_ADDR", c.CollectorAddr}, {"QUERY_ADDR", c.QueryAddr}} {
		if !isLoopback(l.addr) {
			return l.name, l.addr
		}
	}
	return "", ""
}

// isLoopback reports whether a listen address is on loopback only. Host
// names other than localhost count as remote: what they resolve to can
// change.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func nonNegative(name, v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s must be a whole number of 0 or more, not %q", name, v)
	}
	return n, nil
}
