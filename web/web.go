// Package web holds the browser-facing files, embedded in the binary: the
// tracking script the collector serves at /v1/script.js, the stand-ins for
// Plausible's scripts it serves at /js/script.js and /js/pa-<id>.js (one
// file, configured in one placeholder) and for Umami's at /script.js, and
// the dashboard the query API serves at / and /v1/ui/. Nothing is loaded
// from a CDN.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"sort"
	"strings"
)

//go:embed script.js
var script []byte

//go:embed plausible.js
var plausibleSource []byte

// plausible is plausible.js without its comments and indentation, a sixth
// smaller gzipped.
var plausible = compactJS(plausibleSource)

//go:embed umami.js
var umamiSource []byte

// umami is umami.js compacted as plausible is.
var umami = compactJS(umamiSource)

//go:embed dashboard
var dashboard embed.FS

// Script is the tracking script.
func Script() []byte { return script }

// ScriptETag is the script's entity tag, a hash of its content.
var ScriptETag = func() string {
	sum := sha256.Sum256(script)
	return `"` + hex.EncodeToString(sum[:8]) + `"`
}()

// UmamiScript is Tally's stand-in for Umami's tracker, and its entity tag
// (docs/intake.md#umamis-snippet).
func UmamiScript() ([]byte, string) { return umami, umamiETag }

var umamiETag = func() string {
	sum := sha256.Sum256(umami)
	return `"` + hex.EncodeToString(sum[:8]) + `"`
}()

// Dashboard is the dashboard's files, index.html at the root.
func Dashboard() fs.FS {
	sub, err := fs.Sub(dashboard, "dashboard")
	if err != nil {
		panic(err) // the embedded folder always exists
	}
	return sub
}

// PlausibleExtensions is the extensions of Plausible's legacy script that
// Tally's stand-in knows, as they appear in the file's name
// (docs/intake.md#plausibles-snippet).
var PlausibleExtensions = []string{"outbound-links", "file-downloads", "tagged-events", "revenue",
	"hash", "pageview-props", "manual", "local", "exclusions"}

// PlausibleScript is Tally's stand-in for Plausible's legacy script with
// the given extensions on (known ones, see PlausibleExtensions), and its
// entity tag. The same set in any order gives the same bytes.
func PlausibleScript(exts []string) ([]byte, string) {
	sorted := append([]string(nil), exts...)
	sort.Strings(sorted)
	opts := make([]string, len(sorted))
	for i, e := range sorted {
		opts[i] = `"` + e + `":1`
	}
	return plausibleWith("{" + strings.Join(opts, ",") + "}")
}

// PlausibleWebScript is Tally's stand-in for Plausible's 2025 per-site
// script (/js/pa-<id>.js), sending domain as the events' site name, and
// its entity tag (docs/intake.md#plausibles-snippet).
func PlausibleWebScript(domain string) ([]byte, string) {
	d, _ := json.Marshal(domain)
	return plausibleWith(`{"web":1,"d":` + string(d) + `}`)
}

// compactJS drops a script's comment lines (its opening /* ... */ block
// and lines starting with //), blank lines and indentation; the scripts
// keep their comments on lines of their own for this.
func compactJS(src []byte) []byte {
	var out bytes.Buffer
	inBlock := false
	for _, line := range bytes.Split(src, []byte("\n")) {
		line = bytes.TrimSpace(line)
		switch {
		case inBlock:
			inBlock = !bytes.HasSuffix(line, []byte("*/"))
		case bytes.HasPrefix(line, []byte("/*")):
			inBlock = !bytes.HasSuffix(line, []byte("*/"))
		case len(line) == 0 || bytes.HasPrefix(line, []byte("//")):
		default:
			out.Write(line)
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}

// plausibleWith is the script with its configuration object, and its tag.
func plausibleWith(config string) ([]byte, string) {
	b := bytes.Replace(plausible, []byte("TALLY_CONFIG"), []byte(config), 1)
	sum := sha256.Sum256(b)
	return b, `"` + hex.EncodeToString(sum[:8]) + `"`
}
