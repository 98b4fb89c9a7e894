package engine

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// PGSizeEvery is how long a PostgreSQL database size is reused: a scrape
// must not make the server walk the database's folder each time (on a
// large database pg_database_size stats thousands of files), and the
// figure moves slowly (docs/operations.md#metrics).
const PGSizeEvery = 30 * time.Second

// pgSizeTimeout bounds one measurement: a scrape is answered with the last
// figure rather than wait for a database that does not answer.
const pgSizeTimeout = 2 * time.Second

// PGSize measures a PostgreSQL database: its size on the server
// (pg_database_size), at most once per PGSizeEvery. The WAL and the free
// space are the server's, shared by every database of its cluster and
// not readable by an ordinary role, so they read 0
// (docs/operations.md#metrics).
type PGSize struct {
	DB *sql.DB
	// Now is the clock; tests set it.
	Now func() time.Time

	mu    sync.Mutex
	at    time.Time // when bytes was measured; zero before the first
	bytes int64
}

// Bytes is the cached figure, measured again when it is older than
// PGSizeEvery; a failed measurement keeps the last figure.
func (p *PGSize) Bytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := p.Now(); p.at.IsZero() || now.Sub(p.at) >= PGSizeEvery || now.Before(p.at) {
		ctx, cancel := context.WithTimeout(context.Background(), pgSizeTimeout)
		defer cancel()
		var n int64
		if err := p.DB.QueryRowContext(ctx, `SELECT pg_database_size(current_database())`).Scan(&n); err == nil {
			p.bytes, p.at = n, now
		}
	}
	return p.bytes
}
