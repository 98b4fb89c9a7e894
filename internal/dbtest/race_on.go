//go:build race

package dbtest

// Race is true in a test binary built with the race detector.
const Race = true
