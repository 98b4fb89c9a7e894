// Package web holds the browser-facing files, embedded in the binary: the
// tracking script the collector serves at /v1/script.js, the stand-in for
// Plausible's script it serves at /js/script.js (whose extensions are set
// in one placeholder) and the dashboard the query API serves at / and
// /v1/ui/. Nothing is loaded from a CDN.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"sort"
	"strings"
)

//go:embed script.js
var script []byte

//go:embed plausible.js
var plausible []byte

//go:embed dashboard
var dashboard embed.FS

// Script is the tracking script.
func Script() []byte { return script }

// ScriptETag is the script's entity tag, a hash of its content.
var ScriptETag = func() string {
	sum := sha256.Sum256(script)
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
	b := bytes.Replace(plausible, []byte("TALLY_EXTENSIONS"), []byte("{"+strings.Join(opts, ",")+"}"), 1)
	sum := sha256.Sum256(b)
	return b, `"` + hex.EncodeToString(sum[:8]) + `"`
}
