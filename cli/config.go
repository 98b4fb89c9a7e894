package cli

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/tally-analytics/tally/privacy"
	"github.com/tally-analytics/tally/server"
	"github.com/tally-analytics/tally/storage"
)

// config is every setting of docs/configuration.md. Each is read from its
// environment variable, and a flag of the same name in kebab case
// (--database-path) overrides it.
type config struct {
	DatabasePath     string
	DatabaseURL      string // PostgreSQL instead of DatabasePath (docs/postgresql.md)
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
	DatabasePool     int           // the read pool's connections (docs/postgresql.md#running-n-instances-on-postgresql)
	ShutdownDrain    time.Duration // docs/operations.md#behind-a-load-balancer

	// Sourcemap uploads per minute per site, and what a site may store.
	SourcemapUploadRate int
	SourcemapMaxFiles   int
	SourcemapMaxMiB     int

	// QueryTimeout is each query API read's deadline (docs/benchmarks.md#query-api,
	// Deadlines).
	QueryTimeout time.Duration

	// SessionIdle and SessionMaxAge are a dashboard session's idle and
	// absolute lifetimes (docs/accounts.md#sessions).
	SessionIdle   time.Duration
	SessionMaxAge time.Duration

	// TLS is docs/operations.md#https: off unless TLS_DOMAINS or TLS_CERT_FILE
	// is set.
	TLS tlsSettings

	// Mail is the SMTP server of docs/email.md (off without SMTP_HOST);
	// PublicURL the base of the links mail holds.
	Mail      server.MailConfig
	PublicURL string
}

// setting is one row of docs/configuration.md: an environment variable,
// which the flag of the same name in kebab case overrides. This table is
// the only list of settings: flags, defaults and `tally -h` come from it.
type setting struct {
	env     string // DATABASE_PATH; its flag is --database-path
	group   string // the heading `tally -h` lists it under, one of settingGroups
	def     string // the value when neither the flag nor the variable is set
	usage   string
	boolean bool // the flag may stand alone: --dev means --dev=true
}

// maxDatabasePool bounds DATABASE_POOL: past it, reads would wait on the
// writer's one connection or the database's CPUs, not on the pool, and N
// instances would exhaust a PostgreSQL server's max_connections.
const maxDatabasePool = 64

// settingGroups are the headings of `tally -h`, in order.
var settingGroups = []string{"listeners", "storage", "auth", "mail", "privacy", "limits", "dev"}

// settings are every setting, grouped as `tally -h` shows them.
var settings = []setting{
	{env: "COLLECTOR_ADDR", group: "listeners", def: ":8080", usage: "collector listen address (with TLS: 127.0.0.1:8080)"},
	{env: "QUERY_ADDR", group: "listeners", def: ":8081", usage: "query API listen address (with TLS: 127.0.0.1:8081)"},
	{env: "COLLECTOR_URL", group: "listeners", usage: "where DLQ replay and webhooks re-POST events (default http://127.0.0.1:<collector port>)"},
	{env: "TLS_DOMAINS", group: "listeners", usage: "comma-separated names to get certificates for over ACME; serves HTTPS on HTTPS_ADDR"},
	{env: "TLS_CERT_FILE", group: "listeners", usage: "PEM certificate chain you manage (with TLS_KEY_FILE), reloaded on SIGHUP or when the files change"},
	{env: "TLS_KEY_FILE", group: "listeners", usage: "PEM private key of TLS_CERT_FILE"},
	{env: "HTTPS_ADDR", group: "listeners", def: ":443", usage: "with TLS: the one HTTPS listener, serving the collector's routes and the query API's"},
	{env: "HTTP_ADDR", group: "listeners", def: ":80", usage: "with TLS: answers ACME HTTP-01 challenges, redirects the rest to HTTPS; off = none"},
	{env: "ACME_DIRECTORY_URL", group: "listeners", def: acmeDirectoryURL, usage: "the ACME CA's directory (Let's Encrypt by default)"},
	{env: "ACME_EMAIL", group: "listeners", usage: "contact address given to the ACME CA for expiry and problem notices"},
	{env: "SHUTDOWN_DRAIN", group: "listeners", def: "0s", usage: "behind a load balancer: how long /healthz answers 503 draining after SIGTERM before the listeners close, at most 90s"},

	{env: "DATABASE_PATH", group: "storage", def: "./data/analytics.db", usage: "SQLite file (:memory: for a throw-away database)"},
	{env: "DATABASE_URL", group: "storage", usage: "postgres://user:password@host/database: PostgreSQL 15+ instead of DATABASE_PATH"},
	{env: "DATABASE_POOL", group: "storage", def: "4", usage: "read connections of the instance, 1 to 64; each instance also holds the writer's and, on PostgreSQL, the listener's and the rollup slot's"},
	{env: "DURABILITY", group: "storage", def: string(storage.DurabilityPower), usage: "what a 202 survives: power (fsync per commit: power loss and OS crash) or process (process crash only, faster single events)"},
	{env: "RETENTION_DAYS", group: "storage", def: "0", usage: "UTC days of raw events kept, today included (rollups stay), 0 = keep everything"},
	{env: "SCHEMA_BUNDLE_PATH", group: "storage", usage: "tracking plan file; unset disables schema validation"},

	{env: "ADMIN_TOKEN", group: "auth", usage: "operator token; prefer the environment variable, flags show in ps"},
	{env: "REQUIRE_API_KEY", group: "auth", def: server.KeyModeNone, usage: "collector auth: none, tag or require"},
	{env: "SESSION_IDLE_TIMEOUT", group: "auth", def: "24h", usage: "a dashboard session ends after this long without a request, 1m to " + maxSessionAge.String()},
	{env: "SESSION_MAX_AGE", group: "auth", def: "336h", usage: "a dashboard session ends this long after its sign-in whatever its use (14 days), 1m to " + maxSessionAge.String()},

	{env: "SMTP_HOST", group: "mail", usage: "SMTP server of email reports, alerts, invitations and password resets; unset sends no mail"},
	{env: "SMTP_PORT", group: "mail", usage: "its port (default 587 with starttls, 465 with implicit, 25 with none)"},
	{env: "SMTP_TLS", group: "mail", def: server.SMTPStartTLS, usage: "starttls (refused if the server does not offer it), implicit (TLS from the start) or none (a local relay: AUTH in the clear)"},
	{env: "SMTP_USER", group: "mail", usage: "AUTH PLAIN user; unset sends without AUTH"},
	{env: "SMTP_PASSWORD", group: "mail", usage: "AUTH PLAIN password (never logged); prefer the environment variable, flags show in ps"},
	{env: "SMTP_FROM", group: "mail", usage: "From address of mail, such as Tally <tally@example.com>; needed with SMTP_HOST"},
	{env: "PUBLIC_URL", group: "mail", usage: "where people reach the dashboard, the base of links in mail (default https://<first TLS_DOMAINS name>, else http://<QUERY_ADDR>)"},

	{env: "CONSENT_MODE", group: "privacy", def: privacy.ConsentCookieless, usage: "events without consent: cookieless (kept without identifiers) or require (dropped)"},
	{env: "BOT_FILTER", group: "privacy", usage: "events of bots: on (dropped) or off (stored, marked in the inspection feed); default off in dev mode, else on"},
	{env: "GEOIP_DB_PATH", group: "privacy", usage: "MaxMind-format database (.mmdb) for country, region and city; unset uses the built-in country database (DB-IP Lite), off looks up no address"},
	{env: "TRUST_PROXY_HEADERS", group: "privacy", def: "false", boolean: true, usage: "believe X-Forwarded-For and CDN country/city headers"},

	{env: "INGEST_RATE_LIMIT", group: "limits", def: "1000", usage: "events per second per site, 0 = off"},
	{env: "INGEST_QUOTA", group: "limits", def: "0", usage: "accepted events per site per UTC month, 0 = unlimited"},
	{env: "SOURCEMAP_UPLOAD_RATE", group: "limits", def: "30", usage: "sourcemap uploads per minute per site, 0 = off"},
	{env: "SOURCEMAP_MAX_FILES", group: "limits", def: "100", usage: "sourcemap files a site may store, 0 = no cap"},
	{env: "SOURCEMAP_MAX_MIB", group: "limits", def: "256", usage: "MiB of sourcemaps (decoded) a site may store, 0 = no cap"},
	{env: "QUERY_TIMEOUT", group: "limits", def: server.DefaultQueryTimeout.String(), usage: "deadline of each query API read (stopped in the database, then 503 query_timeout), 1s to " + server.MaxQueryTimeout.String()},

	{env: "DEV", group: "dev", def: "false", boolean: true, usage: "dev mode: in-memory database, generated admin token, a ready workspace, site and keys, inspection feed"},
	{env: "DEV_JSON", group: "dev", def: "false", boolean: true, usage: "dev mode, printing the setup as one JSON line on standard output"},
	{env: "DEV_ALLOW_REMOTE", group: "dev", def: "false", boolean: true, usage: "dev mode: allow a non-loopback listen address, where anyone who reaches it can read and wipe the dev data"},
	{env: "DEBUG_FEED_SIZE", group: "dev", def: "10000", usage: "dev mode: decisions kept by the inspection feed"},
}

// flagName is the setting's flag: DATABASE_PATH is --database-path.
func (s setting) flagName() string { return strings.ToLower(strings.ReplaceAll(s.env, "_", "-")) }

// settingValue is a setting's flag: it writes into the values loadConfig
// reads, so a flag given overrides the environment.
type settingValue struct {
	vals    map[string]string
	env     string
	boolean bool
}

func (v settingValue) String() string {
	if v.vals == nil {
		return ""
	}
	return v.vals[v.env]
}
func (v settingValue) Set(s string) error { v.vals[v.env] = s; return nil }
func (v settingValue) IsBoolFlag() bool   { return v.boolean }

// usageError is a command line that names no setting or subcommand:
// the message says how to see the help.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() + " (see 'tally -h')" }
func (e usageError) Unwrap() error { return e.err }

// loadConfig reads every setting from getenv, overridden by args. It
// returns flag.ErrHelp for -h and a usageError for an unknown flag or an
// argument. The steps: the table walked into values, each group of
// settings parsed and checked (the first mistake is the one reported),
// then the defaults TLS and dev mode change.
func loadConfig(args []string, getenv func(string) string, _ io.Writer) (config, error) {
	var c config
	v, err := readSettings(args, getenv)
	if err != nil {
		return c, err
	}
	for _, step := range []func(settingValues) error{
		c.loadText, c.loadSwitches, c.loadTLS, c.loadModes, c.loadLimits, c.loadDurations, c.applyModeDefaults, c.loadMail,
	} {
		if err := step(v); err != nil {
			return c, err
		}
	}
	c.CollectorURL = strings.TrimRight(c.CollectorURL, "/")
	return c, nil
}

// settingValues are the settings as given: each one's text (flag, else
// environment, else default) and which ones the caller set.
type settingValues struct {
	vals   map[string]string
	set    map[string]bool // flag names given on the command line
	getenv func(string) string
}

// readSettings walks the settings table: every setting's default, its
// environment variable over it, its flag over both.
func readSettings(args []string, getenv func(string) string) (settingValues, error) {
	v := settingValues{vals: make(map[string]string, len(settings)), set: map[string]bool{}, getenv: getenv}
	fs := flag.NewFlagSet("tally", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the caller prints one line, or the help
	fs.Usage = func() {}
	for _, s := range settings {
		v.vals[s.env] = s.def
		if e := getenv(s.env); e != "" {
			v.vals[s.env] = e
		}
		fs.Var(settingValue{v.vals, s.env, s.boolean}, s.flagName(), s.usage)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return v, err
		}
		return v, usageError{err}
	}
	if fs.NArg() > 0 {
		return v, usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	fs.Visit(func(f *flag.Flag) { v.set[f.Name] = true })
	return v, nil
}

// unset reports a setting left to its default by flag and environment.
func (v settingValues) unset(env string) bool {
	return !v.set[setting{env: env}.flagName()] && v.getenv(env) == ""
}

// boolean parses a true/false setting.
func (v settingValues) boolean(env string) (bool, error) {
	b, err := strconv.ParseBool(v.vals[env])
	if err != nil {
		return false, fmt.Errorf("%s must be true or false, not %q", env, v.vals[env])
	}
	return b, nil
}

// nonNegative parses a whole-number setting of 0 or more.
func (v settingValues) nonNegative(env string) (int, error) { return nonNegative(env, v.vals[env]) }

// loadText takes the settings used as given: addresses, paths, the
// token; the database URL only checked for its scheme.
func (c *config) loadText(v settingValues) error {
	c.DatabasePath = v.vals["DATABASE_PATH"]
	c.DatabaseURL = v.vals["DATABASE_URL"]
	if c.DatabaseURL != "" && !storage.IsPostgresURL(c.DatabaseURL) {
		// Not the value: it may hold a password.
		return errors.New("DATABASE_URL must start with postgres:// or postgresql://")
	}
	c.CollectorAddr = v.vals["COLLECTOR_ADDR"]
	c.QueryAddr = v.vals["QUERY_ADDR"]
	c.CollectorURL = v.vals["COLLECTOR_URL"]
	c.AdminToken = v.vals["ADMIN_TOKEN"]
	c.RequireAPIKey = v.vals["REQUIRE_API_KEY"]
	c.SchemaBundlePath = v.vals["SCHEMA_BUNDLE_PATH"]
	c.ConsentMode = v.vals["CONSENT_MODE"]
	c.GeoIPDBPath = v.vals["GEOIP_DB_PATH"]
	c.BotFilter = v.vals["BOT_FILTER"]
	return nil
}

// loadSwitches parses the true/false settings; DEV_JSON implies DEV.
func (c *config) loadSwitches(v settingValues) error {
	var err error
	for _, b := range []struct {
		env string
		to  *bool
	}{{"DEV", &c.Dev}, {"DEV_JSON", &c.DevJSON}, {"DEV_ALLOW_REMOTE", &c.DevAllowRemote}, {"TRUST_PROXY_HEADERS", &c.TrustProxy}} {
		if *b.to, err = v.boolean(b.env); err != nil {
			return err
		}
	}
	if c.DevJSON {
		c.Dev = true
	}
	return nil
}

// loadTLS parses the HTTPS settings (docs/operations.md#https).
func (c *config) loadTLS(v settingValues) (err error) {
	c.TLS, err = loadTLSConfig(v.vals)
	return err
}

// loadModes checks the settings that name one of a few modes.
func (c *config) loadModes(v settingValues) (err error) {
	switch {
	case !server.ValidKeyMode(c.RequireAPIKey):
		return fmt.Errorf("REQUIRE_API_KEY must be %s, %s or %s, not %q", server.KeyModeNone, server.KeyModeTag, server.KeyModeRequire, c.RequireAPIKey)
	case !privacy.ValidConsentMode(c.ConsentMode):
		return fmt.Errorf("CONSENT_MODE must be %s or %s, not %q", privacy.ConsentCookieless, privacy.ConsentRequire, c.ConsentMode)
	case c.BotFilter != "" && !privacy.ValidBotFilter(c.BotFilter):
		return fmt.Errorf("BOT_FILTER must be %s or %s, not %q", privacy.BotFilterOn, privacy.BotFilterOff, c.BotFilter)
	}
	c.Durability, err = storage.ParseDurability(v.vals["DURABILITY"])
	return err
}

// loadLimits parses the whole-number settings: rates, quotas, sizes,
// each with its bounds.
func (c *config) loadLimits(v settingValues) error {
	for _, n := range []struct {
		env string
		to  *int
	}{
		{"INGEST_RATE_LIMIT", &c.IngestRateLimit}, {"INGEST_QUOTA", &c.IngestQuota}, {"RETENTION_DAYS", &c.RetentionDays},
		{"SOURCEMAP_UPLOAD_RATE", &c.SourcemapUploadRate}, {"SOURCEMAP_MAX_FILES", &c.SourcemapMaxFiles},
		{"SOURCEMAP_MAX_MIB", &c.SourcemapMaxMiB}, {"DEBUG_FEED_SIZE", &c.DebugFeedSize},
	} {
		var err error
		if *n.to, err = v.nonNegative(n.env); err != nil {
			return err
		}
	}
	switch {
	case c.RetentionDays > storage.MaxRetentionDays:
		return fmt.Errorf("RETENTION_DAYS must be at most %d, not %q", storage.MaxRetentionDays, v.vals["RETENTION_DAYS"])
	case c.SourcemapMaxMiB > maxSourcemapMiB:
		return fmt.Errorf("SOURCEMAP_MAX_MIB must be at most %d (1 TiB), not %q", maxSourcemapMiB, v.vals["SOURCEMAP_MAX_MIB"])
	}
	var err error
	if c.DatabasePool, err = strconv.Atoi(v.vals["DATABASE_POOL"]); err != nil || c.DatabasePool < 1 || c.DatabasePool > maxDatabasePool {
		return fmt.Errorf("DATABASE_POOL must be a whole number from 1 to %d, not %q", maxDatabasePool, v.vals["DATABASE_POOL"])
	}
	return nil
}

// loadDurations parses the settings that are times.
func (c *config) loadDurations(v settingValues) (err error) {
	if c.ShutdownDrain, err = parseShutdownDrain(v.vals["SHUTDOWN_DRAIN"]); err != nil {
		return err
	}
	if c.QueryTimeout, err = time.ParseDuration(v.vals["QUERY_TIMEOUT"]); err != nil || c.QueryTimeout < time.Second || c.QueryTimeout > server.MaxQueryTimeout {
		return fmt.Errorf("QUERY_TIMEOUT must be a duration from 1s to %s such as 30s, not %q", server.MaxQueryTimeout, v.vals["QUERY_TIMEOUT"])
	}
	for _, d := range []struct {
		env string
		to  *time.Duration
	}{{"SESSION_IDLE_TIMEOUT", &c.SessionIdle}, {"SESSION_MAX_AGE", &c.SessionMaxAge}} {
		if *d.to, err = time.ParseDuration(v.vals[d.env]); err != nil || *d.to < time.Minute || *d.to > maxSessionAge {
			return fmt.Errorf("%s must be a duration from 1m to %s such as 24h, not %q", d.env, maxSessionAge, v.vals[d.env])
		}
	}
	return nil
}

// maxSessionAge bounds the session lifetimes: a year.
const maxSessionAge = 8760 * time.Hour

// applyModeDefaults changes the defaults of settings the caller left
// unset, for HTTPS and for dev mode, and refuses what dev mode cannot do.
func (c *config) applyModeDefaults(v settingValues) error {
	if c.TLS.on() {
		// HTTPS_ADDR is the public door: the plain listeners stay for
		// `tally backup`, DLQ replay and local checks, on loopback.
		if v.unset("COLLECTOR_ADDR") {
			c.CollectorAddr = "127.0.0.1:8080"
		}
		if v.unset("QUERY_ADDR") {
			c.QueryAddr = "127.0.0.1:8081"
		}
	}
	if c.Dev {
		if err := c.applyDevDefaults(v); err != nil {
			return err
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
	return nil
}

// applyDevDefaults gives dev mode's defaults to every setting the caller
// left unset (docs/testing.md#dev-mode), on loopback only unless
// DEV_ALLOW_REMOTE.
func (c *config) applyDevDefaults(v settingValues) error {
	if c.DatabaseURL != "" {
		return errors.New("dev mode is single-instance SQLite: unset DATABASE_URL, or DEV")
	}
	if v.unset("DATABASE_PATH") {
		c.DatabasePath = ":memory:"
	}
	if v.unset("COLLECTOR_ADDR") {
		c.CollectorAddr = "127.0.0.1:8080"
	}
	if v.unset("QUERY_ADDR") {
		c.QueryAddr = "127.0.0.1:8081"
	}
	if v.unset("INGEST_RATE_LIMIT") {
		c.IngestRateLimit = 0
	}
	if v.unset("SOURCEMAP_UPLOAD_RATE") {
		c.SourcemapUploadRate = 0
	}
	if v.unset("ADMIN_TOKEN") {
		c.AdminToken = "dev_" + randomHex(16)
	}
	if name, addr := c.remoteListener(); name != "" && !c.DevAllowRemote {
		return fmt.Errorf("dev mode listens only on loopback, as its debug endpoints read and wipe data without a credential: "+
			"%s is %q; use 127.0.0.1:<port>, or set DEV_ALLOW_REMOTE=true (--dev-allow-remote) to expose it anyway", name, addr)
	}
	return nil
}

// database is what logs and check-config show of the database: the
// SQLite file, or PostgreSQL's host and database (never the URL's
// password).
func (c config) database() string {
	if c.DatabaseURL != "" {
		return storage.DescribeDatabaseURL(c.DatabaseURL)
	}
	return c.DatabasePath
}

// maxSourcemapMiB bounds SOURCEMAP_MAX_MIB (1 TiB), far beyond any real
// need and far from overflowing a byte count.
const maxSourcemapMiB = 1 << 20

// remoteListener names the first listener whose address is not loopback
// (an empty host listens on every interface), or "" when all are.
func (c config) remoteListener() (name, addr string) {
	listeners := []struct{ name, addr string }{{"COLLECTOR_ADDR", c.CollectorAddr}, {"QUERY_ADDR", c.QueryAddr}}
	if c.TLS.on() {
		listeners = append(listeners, struct{ name, addr string }{"HTTPS_ADDR", c.TLS.HTTPSAddr})
		if c.TLS.HTTPAddr != "" {
			listeners = append(listeners, struct{ name, addr string }{"HTTP_ADDR", c.TLS.HTTPAddr})
		}
	}
	for _, l := range listeners {
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
