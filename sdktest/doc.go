// Package sdktest drives Segment's own JavaScript SDKs against a real
// Tally: @segment/analytics-node under node and @segment/analytics-next in
// Debian's chromium, both pinned in package-lock.json beside this file and
// installed with `npm ci` (README "Development"). It holds tests only.
package sdktest
