//go:build !(linux || darwin || freebsd)

package engine

// FreeBytes cannot be read where statfs is not available.
func FreeBytes(string) (int64, bool) { return 0, false }
