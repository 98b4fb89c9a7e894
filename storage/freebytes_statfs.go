//go:build linux || darwin || freebsd

package storage

import "syscall"

// freeBytes is the space of dir's file system available to unprivileged
// users (statfs f_bavail), or 0 if it cannot be read.
func freeBytes(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0
	}
	return int64(uint64(st.Bavail) * uint64(st.Bsize))
}
