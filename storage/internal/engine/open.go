package engine

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Pools are an open database's connections as the single writer and the
// reads use them: one write connection, which only the writer uses (so
// the database never sees two writers of one instance contend), and a
// pool of readers. WriteDSN and ReadDSN are what they were opened with
// (URLs on PostgreSQL), for connections of their own (SQLite's
// checkpoints, PostgreSQL's listener and slot).
type Pools struct {
	Write, Read       *sql.DB
	WriteDSN, ReadDSN string
}

// Close closes both pools.
func (p Pools) Close() {
	if p.Read != nil {
		p.Read.Close()
	}
	if p.Write != nil {
		p.Write.Close()
	}
}

// OpenOptions say how to open a database: how many read connections, what
// a commit survives, the migrations to run before anything reads, and the
// clock the migrations record.
type OpenOptions struct {
	ReadConns  int
	Durability Durability
	Migrations Migrations
	Now        func() time.Time
}

// OpenSQLite opens the SQLite file at path (":memory:" for a private
// in-memory database): the write connection with the pragmas of
// SQLiteDSNs, the migrations run on it, then the read-only pool.
func OpenSQLite(ctx context.Context, path string, o OpenOptions) (Pools, error) {
	writeDSN, readDSN, err := SQLiteDSNs(path, o.Durability)
	if err != nil {
		return Pools{}, err
	}
	return open(ctx, "sqlite", writeDSN, readDSN, o, func(write *sql.DB) error {
		err := o.Migrations.Run(ctx, write, o.Now)
		if err != nil && Unwritable(SQLite{}, err) != nil {
			// SQLite's own words can be as vague as "disk I/O error".
			err = fmt.Errorf("%w (is the disk full, or the file or its folder read-only?)", err)
		}
		return err
	})
}

// OpenPostgres opens the PostgreSQL database at databaseURL: the write
// connection, the startup checks of CheckServer on it, the migrations
// (under their advisory lock), then the read pool.
func OpenPostgres(ctx context.Context, databaseURL string, o OpenOptions) (Pools, error) {
	writeURL, readURL, err := PostgresURLs(databaseURL, o.Durability)
	if err != nil {
		return Pools{}, err
	}
	return open(ctx, PGDriverName, writeURL, readURL, o, func(write *sql.DB) error {
		if _, err := CheckServer(ctx, write); err != nil {
			return err
		}
		return o.Migrations.Run(ctx, write, o.Now)
	})
}

// open opens the write connection, prepares the database on it, then
// opens the read pool; on an error nothing stays open.
func open(ctx context.Context, driver, writeDSN, readDSN string, o OpenOptions, prepare func(write *sql.DB) error) (Pools, error) {
	p := Pools{WriteDSN: writeDSN, ReadDSN: readDSN}
	var err error
	if p.Write, err = sql.Open(driver, writeDSN); err != nil {
		return Pools{}, fmt.Errorf("open database: %w", err)
	}
	p.Write.SetMaxOpenConns(1)
	p.Write.SetMaxIdleConns(1)
	p.Write.SetConnMaxLifetime(0)
	p.Write.SetConnMaxIdleTime(0)
	if err := prepare(p.Write); err != nil {
		p.Close()
		return Pools{}, err
	}
	if p.Read, err = sql.Open(driver, readDSN); err != nil {
		p.Close()
		return Pools{}, fmt.Errorf("open database: %w", err)
	}
	p.Read.SetMaxOpenConns(o.ReadConns)
	p.Read.SetMaxIdleConns(o.ReadConns)
	p.Read.SetConnMaxIdleTime(0)
	return p, nil
}
