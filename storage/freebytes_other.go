//go:build !(linux || darwin || freebsd)

package storage

// freeBytes is 0 where statfs is not available.
func freeBytes(string) int64 { return 0 }
