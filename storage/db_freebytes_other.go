//go:build !(linux || darwin || freebsd)

package storage

// freeBytes cannot be read where statfs is not available.
func freeBytes(string) (int64, bool) { return 0, false }
