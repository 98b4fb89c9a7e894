// Package web holds the browser-facing files, embedded in the binary: the
// tracking script the collector serves at /v1/script.js and the dashboard
// the query API serves at / and /v1/ui/. Nothing is built at run time and
// nothing is loaded from a CDN.
package web

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
)

//go:embed script.js
var script []byte

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
