//go:build linux || darwin || freebsd

package engine

import "syscall"

// FreeBytes is the space of dir's file system available to unprivileged
// users (statfs f_bavail); ok is false if it cannot be read.
func FreeBytes(dir string) (free int64, ok bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(uint64(st.Bavail) * uint64(st.Bsize)), true
}
