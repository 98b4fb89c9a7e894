// Package sdktest drives Segment's own JavaScript SDKs and Plausible's and
// Umami's clients against a real Tally: @segment/analytics-node and
// @umami/node under node, @segment/analytics-next, Plausible's tracker and
// Umami's in Debian's chromium, pinned in package-lock.json beside this
// file (Umami's tracker in testdata) and installed with `npm ci`
// (docs/development.md). It holds tests only.
package sdktest
