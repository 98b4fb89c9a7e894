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

// plausible is plausible.js without its comments and indentation, and
// tightened: a quarter smaller gzipped.
var plausible = tightJS(compactJS(plausibleSource))

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
var PlausibleExtensions = []string{"compat", "outbound-links", "file-downloads", "tagged-events", "revenue",
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

// tightJS drops, outside string literals, the spaces next to punctuation
// and the line breaks after ; { and , (never after }, where a statement
// may end without its semicolon). It relies on what plausible.js keeps
// to: strings in double quotes, no space in a regular expression literal,
// no comment after code on a line, and no "+ +" or "- -".
func tightJS(src []byte) []byte {
	const punct = `=:?,;{}()[]<>|&+*!`
	out := make([]byte, 0, len(src))
	last := func() byte {
		if len(out) == 0 {
			return 0
		}
		return out[len(out)-1]
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '"':
			// Copy the string whole, escapes included.
			j := i + 1
			for ; j < len(src) && src[j] != '"'; j++ {
				if src[j] == '\\' {
					j++
				}
			}
			out = append(out, src[i:min(j+1, len(src))]...)
			i = j
		case c == ' ' && (strings.IndexByte(punct, last()) >= 0 || i+1 < len(src) && strings.IndexByte(punct, src[i+1]) >= 0):
		case c == '\n' && strings.IndexByte(";{,", last()) >= 0:
		default:
			out = append(out, c)
		}
	}
	return out
}

// plausibleWith is the script with its configuration object, and its tag.
func plausibleWith(config string) ([]byte, string) {
	b := bytes.Replace(plausible, []byte("TALLY_CONFIG"), []byte(config), 1)
	sum := sha256.Sum256(b)
	return b, `"` + hex.EncodeToString(sum[:8]) + `"`
}
