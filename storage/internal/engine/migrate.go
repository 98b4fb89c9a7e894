package engine

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// TimeLayout is the one timestamp format of the database: UTC, exactly
// three fraction digits. It is fixed width, so stored text sorts in time
// order.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Migrations are a backend's numbered migration files, handed in by their
// owner: the files of Files that Glob matches, each named after its
// version ("0001_name.sql").
type Migrations struct {
	Files fs.FS
	Glob  string
	// LockKey, when not 0, is the PostgreSQL advisory lock each
	// migration's transaction takes first, so that instances starting
	// together apply each migration once. SQLite needs none: the write
	// connection's BEGIN IMMEDIATE already excludes other writers.
	LockKey int64
}

// Run applies every migration of m not yet recorded in schema_migrations,
// each in its own transaction together with its row there, so that one
// that fails (a bad file, a full disk) leaves the database at the version
// before it. A migration is looked up again inside its transaction:
// another instance may have applied it since. A database newer than the
// files is refused.
func (m Migrations) Run(ctx context.Context, db *sql.DB, now func() time.Time) error {
	err := m.inTx(ctx, db, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`)
		return err
	})
	if err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	names, err := fs.Glob(m.Files, m.Glob)
	if err != nil {
		return err
	}
	sort.Strings(names)
	var newest int
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&newest); err != nil {
		return fmt.Errorf("read schema_migrations: %w", err)
	}
	applied, err := appliedMigrations(ctx, db)
	if err != nil {
		return err
	}
	known, current := 0, newest
	for _, name := range names {
		base := filepath.Base(name)
		version, err := migrationVersion(base)
		if err != nil {
			return err
		}
		known = max(known, version)
		if applied[version] {
			continue
		}
		body, err := fs.ReadFile(m.Files, name)
		if err != nil {
			return err
		}
		err = m.inTx(ctx, db, func(tx *sql.Tx) error {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, version).Scan(&n); err != nil || n > 0 {
				return err
			}
			// No arguments: the file goes as one text, so it may hold many
			// statements.
			if _, err := tx.ExecContext(ctx, string(body)); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)`,
				version, base, now().UTC().Format(TimeLayout)); err != nil {
				return fmt.Errorf("record the migration: %w", err)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("migration %s failed and was rolled back; the database stays at schema version %d: %w", base, current, err)
		}
		current = max(current, version)
	}
	if newest > known {
		return fmt.Errorf("database schema version %d is newer than this binary knows (%d); run a newer release", newest, known)
	}
	return nil
}

// inTx runs step in one transaction and commits it, under LockKey when
// set.
func (m Migrations) inTx(ctx context.Context, db *sql.DB, step func(*sql.Tx) error) error {
	if m.LockKey == 0 {
		return PlainTx(ctx, db, step)
	}
	return PlainTx(ctx, db, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, m.LockKey); err != nil {
			return err
		}
		return step(tx)
	})
}

// Newest is the highest version among m's files.
func (m Migrations) Newest() (int, error) {
	names, err := fs.Glob(m.Files, m.Glob)
	if err != nil {
		return 0, err
	}
	newest := 0
	for _, name := range names {
		v, err := migrationVersion(filepath.Base(name))
		if err != nil {
			return 0, err
		}
		newest = max(newest, v)
	}
	return newest, nil
}

// appliedMigrations are the versions schema_migrations records.
func appliedMigrations(ctx context.Context, db *sql.DB) (map[int]bool, error) {
	rows, err := db.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	defer rows.Close()
	applied := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		applied[v] = true
	}
	return applied, rows.Err()
}

// PlainTx runs step in a transaction and commits it.
func PlainTx(ctx context.Context, db *sql.DB, step func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	if err := step(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// migrationVersion is the number a migration's file name starts with.
func migrationVersion(base string) (int, error) {
	version, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
	if err != nil {
		return 0, fmt.Errorf("migration %s: name must start with a number", base)
	}
	return version, nil
}
