package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tally-analytics/tally/storage"
)

// backup is `tally backup [--force] PATH`: a consistent copy of the
// database while the service runs (docs/storage.md#backup-and-restore). A
// running server makes the copy itself, through its write connection, when
// asked at QUERY_ADDR with ADMIN_TOKEN; with no server answering there, the
// command copies DATABASE_PATH from a connection of its own.
func backup(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	if getenv("DATABASE_URL") != "" {
		fmt.Fprintln(stderr, "tally backup: DATABASE_URL is set, and a PostgreSQL database is no file to copy: use pg_dump or your provider's point-in-time recovery")
		return 2
	}
	fs := flag.NewFlagSet("tally backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbPath := fs.String("database-path", env("DATABASE_PATH", "./data/analytics.db"), "the database to copy [DATABASE_PATH]")
	queryAddr := fs.String("query-addr", env("QUERY_ADDR", ":8081"), "where the running server's query API listens [QUERY_ADDR]")
	token := fs.String("admin-token", env("ADMIN_TOKEN", ""), "the running server's operator token; prefer the environment variable [ADMIN_TOKEN]")
	force := fs.Bool("force", false, "replace PATH if it exists")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: tally backup [--force] PATH\n\nWrites a consistent copy of the database to PATH while the server runs.")
		fs.PrintDefaults()
	}
	// Flags may come after PATH too: `tally backup x.db --force`.
	paths, code, ok := parseFlagsAndArgs(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(paths) != 1 || paths[0] == "" {
		fmt.Fprintln(stderr, "tally backup: want one PATH, the file to write the copy to")
		return 2
	}
	path, err := filepath.Abs(paths[0])
	if err != nil {
		fmt.Fprintln(stderr, "tally backup:", err)
		return 2
	}
	if _, err := os.Lstat(path); err == nil && !*force {
		fmt.Fprintf(stderr, "tally backup: %s already exists; pass --force to replace it\n", path)
		return 2
	}
	if *dbPath == ":memory:" {
		fmt.Fprintln(stderr, "tally backup: DATABASE_PATH is :memory:, which has no file to copy")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	how := "through the server at " + *queryAddr
	stats, reached, err := backupThroughServer(ctx, serverURL(*queryAddr), *token, *dbPath, path, *force)
	if !reached {
		how = "from " + *dbPath + " (no server answered at " + *queryAddr + ")"
		stats, err = storage.BackupFile(ctx, *dbPath, path, *force)
	}
	if err != nil {
		fmt.Fprintln(stderr, "tally backup:", err)
		return 1
	}
	fmt.Fprintf(stdout, "tally backup: wrote %s, %d bytes, in %.1f s, %s\n", stats.Path, stats.Bytes, stats.Duration.Seconds(), how)
	return 0
}

// serverURL is the query API's base URL for a listen address: an address
// that listens on every interface is reached on loopback.
func serverURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// backupThroughServer asks the server at base to write the copy. reached
// is false when nothing listens there, so that the caller copies the file
// itself.
func backupThroughServer(ctx context.Context, base, token, dbPath, path string, force bool) (stats storage.BackupStats, reached bool, err error) {
	abs, err := filepath.Abs(dbPath)
	if err != nil {
		return stats, false, err
	}
	body, _ := json.Marshal(map[string]any{"database_path": abs})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/backup", bytes.NewReader(body))
	if err != nil {
		return stats, false, nil // not an address a server could listen on
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	// No overall timeout: copying a large database takes a while.
	client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext}}
	res, err := client.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return stats, false, nil
		}
		return stats, true, fmt.Errorf("the server at %s: %w", base, err)
	}
	defer res.Body.Close()
	var answer struct {
		Path       string `json:"path"`
		Bytes      int64  `json:"bytes"`
		Pages      int    `json:"pages"`
		DurationMS int64  `json:"duration_ms"`
		Error      struct {
			Code, Message string
		} `json:"error"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&answer); err != nil {
		return stats, true, fmt.Errorf("the server at %s answered %s, not a backup", base, res.Status)
	}
	if res.StatusCode != http.StatusOK {
		return stats, true, fmt.Errorf("the server at %s refused: %s (%s)", base, answer.Error.Message, answer.Error.Code)
	}
	// The server wrote the copy into its backups folder; this process, run
	// by the operator, puts it where they asked.
	if err := moveBackup(answer.Path, path, force); err != nil {
		return stats, true, fmt.Errorf("the copy is at %s, but moving it to %s failed: %w", answer.Path, path, err)
	}
	return storage.BackupStats{Path: path, Bytes: answer.Bytes, Pages: answer.Pages,
		Duration: time.Duration(answer.DurationMS) * time.Millisecond}, true, nil
}

// moveBackup moves the finished copy src to dst: replacing dst only with
// force, copying (and syncing) when the two are on different file systems,
// and syncing dst's folder so the new name survives a crash.
func moveBackup(src, dst string, force bool) error {
	place := func(from string) error {
		if force {
			return os.Rename(from, dst)
		}
		if err := os.Link(from, dst); err != nil { // refuses a dst made meanwhile
			return err
		}
		return os.Remove(from)
	}
	err := place(src)
	if errors.Is(err, syscall.EXDEV) {
		tmp := dst + ".tmp-" + filepath.Base(src)
		if err = copyFile(src, tmp); err == nil {
			if err = place(tmp); err == nil {
				err = os.Remove(src)
			}
		}
		os.Remove(tmp)
	}
	if err != nil {
		return err
	}
	dir, err := os.Open(filepath.Dir(dst))
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}

// copyFile copies src to a new file dst, synced, readable by its owner only.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
