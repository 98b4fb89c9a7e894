package storage

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Identity links are kept in a WITHOUT ROWID table since migration 0017
// (docs/storage.md#event-bytes): its primary key (site_id, anon_id, user_id) is
// the row, created_at is Unix milliseconds, and identity_links_user holds
// (site_id, user_id, anon_id) for lookups by user. A database of before
// keeps its links in identity_links_rowid until the link move (linkMove)
// has moved them all, a chunk per writer job. Until then every link is in
// exactly one of the two tables: the move takes a chunk out of the old one
// and into the new one in one transaction, and intake adds a link to the
// new one only if the old one does not hold it. Readers read both and
// erasures delete from both (linkTables); the old table stays, empty,
// until the next start drops it, so that SQL naming it stays valid for the
// life of the process.

// oldLinksTable holds the links of a database of before migration 0017
// until they are moved.
const oldLinksTable = "identity_links_rowid"

// linkMoveChunk is how many links one writer job of the move takes: each
// costs a few random pages (the old table and its index by user, the new
// index), so a job's time grows with the tables. At the read benchmark's
// 1M events (191,000 links) a job of 100 held the writer 3.9 ms (median;
// 250 took 9.6 ms, 1,000 took 44 ms), the whole move 11 s; at 2,000,000
// links jobs of 250 took 19 ms (docs/storage.md#event-bytes).
const linkMoveChunk = 100

// linkTables is where a query reads identity links from: the table, or the
// union of it and the old one while links remain there (old). Each method
// gives a FROM source with the columns site_id, anon_id, user_id and
// created_at, named alias unless alias is "".
type linkTables struct {
	old bool
	// noHints: the backend takes no INDEXED BY (PostgreSQL).
	noHints bool
}

// newLinks are the links of a database whose move is done; bothLinks
// those of one whose move runs.
var newLinks, bothLinks = linkTables{}, linkTables{old: true}

// byUser is searched by (site_id, user_id), in anon id order. Each arm
// names its index: without statistics SQLite searches the old table's
// user lookups through its primary key's index, every link of the site.
func (l linkTables) byUser(alias string) string {
	if l.noHints {
		return l.source(alias, "", "")
	}
	return l.source(alias, ` INDEXED BY identity_links_user`, ` INDEXED BY identity_links_site_user`)
}

// any is searched by (site_id, anon_id) or the whole key.
func (l linkTables) any(alias string) string {
	return l.source(alias, "", "")
}

func (l linkTables) source(alias, hint, oldHint string) string {
	as := ""
	if alias != "" {
		as = ` AS ` + alias
	}
	if !l.old {
		return `identity_links` + as + hint
	}
	return `(SELECT site_id, anon_id, user_id, created_at FROM identity_links` + hint + `
		UNION ALL SELECT site_id, anon_id, user_id, created_at FROM ` + oldLinksTable + oldHint + `)` + as
}

// links returns where to read links from now. A reader asks before its
// transaction's first statement: the answer only changes from both to the
// new table once the old one is empty, which any later snapshot sees.
func (db *DB) links() linkTables {
	l := newLinks
	if db.oldLinks.Load() {
		l = bothLinks
	}
	l.noHints = db.d.IndexedBy("x") == ""
	return l
}

// deleteFrom names the tables to delete links from, each with its index by
// user when byUser: without it SQLite deletes a user's links of the new
// table by searching its primary key for the site, every link of the site.
func (l linkTables) deleteFrom(byUser bool) []string {
	tables := []string{`identity_links`}
	byUser = byUser && !l.noHints
	if byUser {
		tables[0] += ` INDEXED BY identity_links_user`
	}
	if l.old {
		old := oldLinksTable
		if byUser {
			old += ` INDEXED BY identity_links_site_user`
		}
		tables = append(tables, old)
	}
	return tables
}

// linked matches a row of table (aliased by its name) whose anon id is
// linked to the user ?2 on site ?1.
func (l linkTables) linked(table string) string {
	q := `EXISTS (SELECT 1 FROM identity_links l WHERE l.site_id = ?1 AND l.anon_id = ` + table + `.anon_id AND l.user_id = ?2)`
	if l.old {
		q = `(` + q + ` OR EXISTS (SELECT 1 FROM ` + oldLinksTable + ` l WHERE l.site_id = ?1 AND l.anon_id = ` + table + `.anon_id AND l.user_id = ?2))`
	}
	return q
}

// linkCreatedMS is a link's created_at as Unix ms: the text of a link
// stored before migration 0017 (always 2006-01-02T15:04:05.000Z) read as
// such, any other value as it is.
const linkCreatedMS = `COALESCE(unixepoch(created_at) * 1000 + CAST(substr(created_at, 21, 3) AS INTEGER), created_at)`

// linkCreatedText renders a link's created_at for the GDPR export as the
// text it was stored as before migration 0017.
func linkCreatedText(v any) any {
	if ms, ok := v.(int64); ok {
		return FormatTime(time.UnixMilli(ms))
	}
	return v
}

// openLinks drops the old links table when it is empty, and reports
// whether it holds links to move. It runs at open, before any reader.
func openLinks(ctx context.Context, write *sql.DB) (old bool, err error) {
	var exists bool
	if err := write.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?)`,
		oldLinksTable).Scan(&exists); err != nil || !exists {
		return false, err
	}
	if err := write.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM `+oldLinksTable+`)`).Scan(&old); err != nil || old {
		return old, err
	}
	if _, err := write.ExecContext(ctx, `DROP TABLE `+oldLinksTable); err != nil {
		return false, fmt.Errorf("drop %s: %w", oldLinksTable, err)
	}
	return false, nil
}

// linkMove moves the links of a database of before migration 0017 into the
// new table in the background, a chunk per writer job, from the lowest
// rowid up. Each job both inserts and deletes, so a crash or restart
// resumes with the links still in the old table and nothing is copied
// twice; the rows deleted from the old table are overwritten
// (secure_delete) and its pages reused by the new one, so the move needs no
// second copy of the links either.
func (db *DB) linkMove(chunk int) conversion {
	if chunk == 0 {
		chunk = linkMoveChunk
	}
	if !db.oldLinks.Load() {
		chunk = -1
	}
	return conversion{Name: "identity link move", Done: "identity links moved", Unit: "links", Chunk: chunk,
		Step: func(ctx context.Context, chunk int) (int64, bool, error) {
			return db.moveLinks(ctx, chunk)
		}}
}

// moveLinks moves up to chunk links in one writer job and reports how many
// and whether none are left. It takes the first links in the order of the
// old table's primary key, which is the new table's: the inserts go to
// neighbouring pages of the new table, and the deletions to neighbouring
// entries of the old primary key's index, instead of a random page of each
// per link. A link intake added meanwhile to the new table is not in the
// old one; should both hold one anyway, the earlier created_at is kept.
func (db *DB) moveLinks(ctx context.Context, chunk int) (moved int64, done bool, err error) {
	err = db.writer.do(ctx, func(tx *writeTx) error {
		moved, done = 0, false
		res, err := tx.Exec(`INSERT INTO identity_links(site_id, anon_id, user_id, created_at)
			SELECT site_id, anon_id, user_id, `+linkCreatedMS+` FROM `+oldLinksTable+` WHERE true
			ORDER BY site_id, anon_id, user_id LIMIT ?1
			ON CONFLICT(site_id, anon_id, user_id) DO UPDATE SET created_at =
				CASE WHEN excluded.created_at < identity_links.created_at THEN excluded.created_at ELSE identity_links.created_at END`, chunk)
		if err != nil {
			return fmt.Errorf("move links: %w", err)
		}
		if moved, err = res.RowsAffected(); err != nil {
			return fmt.Errorf("move links: %w", err)
		}
		if _, err := tx.Exec(`DELETE FROM `+oldLinksTable+` WHERE rowid IN
			(SELECT rowid FROM `+oldLinksTable+` ORDER BY site_id, anon_id, user_id LIMIT ?1)`, chunk); err != nil {
			return fmt.Errorf("move links: %w", err)
		}
		if done = moved < int64(chunk); done {
			tx.OnCommit(func() { db.oldLinks.Store(false) })
		}
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	return moved, done, nil
}

// deleteOldLinks deletes up to limit links of site from the old table
// (all of them when limit is negative) while it exists: a site delete or
// reset must not leave links there for the move to bring back.
func deleteOldLinks(tx *writeTx, site string, limit int) (int64, error) {
	var exists bool
	if err := tx.QueryRow(`SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?)`,
		oldLinksTable).Scan(&exists); err != nil || !exists {
		return 0, err
	}
	res, err := tx.Exec(`DELETE FROM `+oldLinksTable+` WHERE rowid IN (SELECT rowid FROM `+oldLinksTable+` WHERE site_id = ? LIMIT ?)`, site, limit)
	if err != nil {
		return 0, fmt.Errorf("delete %s of site: %w", oldLinksTable, err)
	}
	return res.RowsAffected()
}
