// Package smallfs gives tests a real, size-limited file system to fill, so
// that a full disk is SQLite's real SQLITE_FULL and not a simulation.
package smallfs

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// Mount mounts a tmpfs of size (e.g. "64m") on a fresh folder and returns
// it; it is unmounted at cleanup, after the cleanups registered later (a
// harness that closes the database's files). Mounting needs root: without
// it the test is skipped, except in CI (CI set), which runs as root and
// must not skip it.
func Mount(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("this test needs root to mount a small file system, and CI runs as root")
		}
		t.Skip("needs root to mount a small file system")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	// Registered after TempDir's own cleanup, so it runs before it.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount: %v: %s", err, out)
		}
	})
	return dir
}

// Fill writes a filler file into dir until the file system has only leave
// bytes free (0: none at all), and returns the function that deletes it.
func Fill(t *testing.T, dir string, leave int64) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	// 64 KiB writes until one fails, then 512 bytes for what is left.
	for _, n := range []int{len(chunk), 512} {
		for {
			_, err := f.Write(chunk[:n])
			if err == nil {
				continue
			}
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	if leave > 0 {
		fi, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(fi.Size() - leave); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	return func() {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}
