package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tally-analytics/tally/fault"
)

// sessionGap is the inactivity that ends a session
// (docs/intake.md#identity-and-sessions).
const sessionGap = 30 * time.Minute

// dedupWindow is how long a stored event's id suppresses repeats
// (docs/intake.md#gates-in-order, dedup and storage).
const dedupWindow = 48 * time.Hour

// dedupKey is an event id as event_ids holds it: the 16 bytes of a UUID in
// its canonical form (lower case, with hyphens), which is most ids, or else
// the id's text. Each id has one form, so a repeat always finds the first;
// the blob takes 16 bytes of the 36, in the table and in its index
// (docs/storage.md#event-bytes).
func dedupKey(id string) any {
	if len(id) == 36 {
		if u, err := uuid.Parse(id); err == nil && u.String() == id {
			return u[:]
		}
	}
	return id
}

// IngestEvent is one validated, enriched event ready to store.
type IngestEvent struct {
	ID, SiteID, Type, AnonID string
	UserID, URL, Referrer    *string
	TS                       time.Time
	Raw                      []byte
	// Country, City, Browser, OS, DeviceType: "" is stored as NULL.
	Country, City, Browser, OS, DeviceType string
	// Region (ISO 3166-2) and CityID (GeoNames) are kept in the visit
	// only, not in the events row (migration 0028); "" is NULL.
	Region, CityID string
	// BrowserVersion and OSVersion (privacy.Agent's) are kept by the
	// event's visit only, of its landing event ("" is NULL).
	BrowserVersion, OSVersion string
	// Traits is the traits object of an identify event, or nil.
	Traits []byte
	// Credential records who sent the event: "site" (legacy site bearer)
	// or "key:<key id>".
	Credential string
	// Campaign is what the wire format states of the event's campaign
	// besides its URL (Segment's context.campaign), or nil
	// (docs/intake.md#visits).
	Campaign *Campaign
	// ReceivedAt, when set, is stored as the event's received time instead
	// of the moment the writer takes it: an import keeps its source's.
	ReceivedAt time.Time
	// Engagement, when set, makes the event a measure of its pageview,
	// added to that row instead of stored (intake_engagement.go).
	Engagement *Engagement
}

// Quarantined is an event stored in the DLQ instead of events.
type Quarantined struct {
	ID, SiteID string
	Payload    []byte
	Errors     string // JSON array of {path, message}
	AnonID     string
	UserID     *string
	Endpoint   string
	UserAgent  string // the User-Agent the event came with, re-sent on replay
	// Cookieless marks a consent-denied event quarantined in its cookieless
	// form: UserAgent is then empty and Agent holds what events would.
	Cookieless bool
	Agent      QuarantinedAgent
}

// QuarantinedAgent is the browser, OS and device type of a cookieless
// quarantined event, kept instead of its User-Agent.
type QuarantinedAgent struct {
	Browser, OS, DeviceType string
}

// IngestResult tells, per event, whether it was stored or suppressed as a
// duplicate.
type IngestResult struct {
	Duplicate []bool
	Accepted  int
	// TraitsDropped holds, per event, the names of the traits of an
	// identify that its user's profile did not take because of the
	// profile caps (MaxProfileTraits, MaxProfileBytes); nil for most.
	// The event itself is stored.
	TraitsDropped [][]string
}

// insertEventSQL stores an event: the id as dedupKey gives it and the
// agent as a code (migration 0020, intake_event_columns.go).
const insertEventSQL = `INSERT INTO events(id_text, site_id, type, url, ts, anon_id, user_id, referrer, country, city,
	agent, browser_text, os_text, device_type_text, raw, received_at, credential)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// ingestStmts are prepared once on the write connection.
type ingestStmts struct {
	dedup, insertEvent, insertFirstEvent, link, profileTraits, profile, hasSession, newestSession, loadSessions, updateSession, updateSessionEnd, updateSessionTail, deleteSession,
	dailyEvents, dailySessions, usage, dlq, dailyDims, dropPartials, credentialCode, newCredential, imported, engage *sql.Stmt
	// insertSession inserts one session; its id is the result's
	// LastInsertId. insertSessions[k], prepared only by
	// prepareSessionReturning, inserts 1<<k sessions and returns their ids
	// (see insertSessions).
	insertSession  *sql.Stmt
	insertSessions [7]*sql.Stmt
	returning      bool
	// set, prepared only by prepareSessionSet (PostgreSQL), reads and
	// writes a run's sessions a statement for all its visitors
	// (intake_sessions_pg.go).
	set *sessionSetStmts
}

// prepareSessionReturning makes intake read new sessions' ids back with
// RETURNING, 64 sessions a statement, instead of LastInsertId: for a
// driver without LastInsertId (PostgreSQL's, issue 17). On SQLite it is
// slower: a result set per statement costs more than LastInsertId per
// row (CPU per event +3.7%, docs/benchmarks.md machine, medians of 8
// interleaved BenchmarkIngestCPU pairs), so SQLite keeps LastInsertId.
func (s *ingestStmts) prepareSessionReturning(ctx context.Context, db *sql.DB) error {
	for k := range s.insertSessions {
		p, err := db.PrepareContext(ctx, insertSessionsSQL(1<<k, " RETURNING id, site_id, anon_id, start_ms"))
		if err != nil {
			return fmt.Errorf("prepare session inserts: %w", err)
		}
		s.insertSessions[k] = p
	}
	s.returning = true
	return nil
}

// insertSessionsSQL inserts n sessions, then tail. With RETURNING, the
// columns besides id tell which session each id is: the order of
// RETURNING's rows is not promised. Times as integers (migration 0016):
// start_ms, and the end as duration_ms, usually 0 to 3 bytes.
func insertSessionsSQL(n int, tail string) string {
	row := `(?, ?, ?, '', '', ?, ?, ?` + strings.Repeat(`, ?`, sessionVisitArgs) + `)`
	return `INSERT INTO sessions(site_id, anon_id, user_id, start_text, end_text, start_ms, duration_ms, event_count, ` + visitStoredColumns + `)
		VALUES ` + row + strings.Repeat(`, `+row, n-1) + tail
}

// sessionVisitArgs is how many values visit.args gives: one per column of
// visitStoredColumns.
var sessionVisitArgs = strings.Count(visitStoredColumns, ",") + 1

// prepareIngest prepares intake's statements on the write connection db;
// d gives the SQL that differs between backends, and slot is the rollup
// slot this instance writes on PostgreSQL (docs/postgresql.md#on-postgresql;
// ignored on SQLite).
func prepareIngest(ctx context.Context, db *sql.DB, d dialect, slot int, oldLinks bool) (*ingestStmts, error) {
	var s ingestStmts
	link := `INSERT INTO identity_links(site_id, anon_id, user_id, created_at) VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING`
	if oldLinks {
		// While links of before 0017 remain in the old table, a link goes
		// to the new one only if the old one does not hold it (intake_links.go).
		link = `INSERT INTO identity_links(site_id, anon_id, user_id, created_at) SELECT ?1, ?2, ?3, ?4
			WHERE NOT EXISTS (SELECT 1 FROM ` + oldLinksTable + ` WHERE site_id = ?1 AND anon_id = ?2 AND user_id = ?3) ON CONFLICT DO NOTHING`
	}
	stmts := []struct {
		dst **sql.Stmt
		sql string
	}{
		{&s.dedup, `INSERT INTO event_ids(site_id, id, received_ms) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`},
		{&s.engage, engageSQL},
		{&s.insertEvent, d.insertEventSQL(false)},
		// The run's first event also returns its seq (see ready); the
		// others need not.
		{&s.insertFirstEvent, d.insertEventSQL(true)},
		{&s.credentialCode, `SELECT code FROM credentials WHERE credential = ?`},
		{&s.imported, `INSERT INTO imported_ids(site_id, id) VALUES (?, ?) ON CONFLICT DO NOTHING`},
		{&s.newCredential, `INSERT INTO credentials(credential) VALUES (?) RETURNING code`},
		{&s.link, link},
		// Traits are merged in Go (intake_traits.go) between the read and the
		// write.
		{&s.profileTraits, `SELECT traits FROM user_profiles WHERE site_id = ? AND user_id = ?`},
		{&s.profile, `INSERT INTO user_profiles(site_id, user_id, traits, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT(site_id, user_id) DO UPDATE SET traits = excluded.traits, updated_at = excluded.updated_at`},
		{&s.hasSession, hasSessionSQL},
		{&s.newestSession, newestSessionSQL},
		{&s.loadSessions, loadSessionsSQL},
		// Setting start_ms (or start_text), even to its own value, rewrites
		// both indexes that key started_ms: the usual update, of a session
		// that took later events, leaves them out (updateSessionEnd, and
		// updateSessionTail for a visit of the memo, whose landing and start
		// cannot change). A row stored before 0016 takes the full update,
		// which writes it in the new form.
		{&s.updateSession, `UPDATE sessions SET start_text = '', end_text = '', start_ms = ?, duration_ms = ?, event_count = ?, user_id = ?, ` + visitSet + ` WHERE id = ?`},
		{&s.updateSessionEnd, `UPDATE sessions SET duration_ms = ?, event_count = ?, user_id = ?, ` + visitSet + ` WHERE id = ?`},
		{&s.updateSessionTail, `UPDATE sessions SET duration_ms = ?, event_count = ?, user_id = ?, ` + visitTailSet + ` WHERE id = ?`},
		{&s.deleteSession, `DELETE FROM sessions WHERE id = ?`},
		// The rollups name the stored row's column by its table: a bare
		// name beside excluded's is ambiguous to PostgreSQL (issue 17).
		{&s.dailyEvents, d.rollupUpsertSQL("daily_events", []string{"site_id", "day", "type"}, []string{"count"}, slot)},
		{&s.dailySessions, d.rollupUpsertSQL("daily_sessions", []string{"site_id", "day"}, []string{"sessions", "duration_ms", "events", "bounces"}, slot)},
		{&s.dailyDims, d.rollupUpsertSQL("daily_dimensions", []string{"site_id", "day", "dimension", "value"}, []string{"count"}, slot)},
		{&s.dropPartials, dropPartialsSQL},
		{&s.usage, d.rollupUpsertSQL("site_usage", []string{"site_id", "month"}, []string{"accepted"}, slot)},
		{&s.dlq, `INSERT INTO dlq(id, site_id, payload, error, received_at, anon_id, user_id, endpoint, user_agent,
			cookieless, browser, os, device_type) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT(site_id, id) DO UPDATE SET payload = excluded.payload, error = excluded.error,
			received_at = excluded.received_at, anon_id = excluded.anon_id, user_id = excluded.user_id,
			endpoint = excluded.endpoint, user_agent = excluded.user_agent, cookieless = excluded.cookieless,
			browser = excluded.browser, os = excluded.os, device_type = excluded.device_type`},
	}
	stmts = append(stmts, struct {
		dst **sql.Stmt
		sql string
	}{&s.insertSession, insertSessionsSQL(1, "")})
	for _, st := range stmts {
		p, err := db.PrepareContext(ctx, st.sql)
		if err != nil {
			return nil, fmt.Errorf("prepare %q: %w", st.sql[:40], err)
		}
		*st.dst = p
	}
	return &s, nil
}

// Ingest stores events (deduplicated by site and id) and quarantined DLQ
// rows, and keeps identity links, profiles, sessions and the daily rollups
// current in the same transaction. It returns after the commit. A full write
// queue gives ErrQueueFull at once. stats, when set, receives the duration
// of the group commit.
func (db *DB) Ingest(ctx context.Context, events []IngestEvent, dlq []Quarantined, stats func(time.Duration)) (IngestResult, error) {
	if len(events) == 0 && len(dlq) == 0 {
		return IngestResult{Duplicate: []bool{}}, nil
	}
	w, j := db.ingestJob(events, dlq, stats)
	if err := db.writer.Run(ctx, j, false); err != nil {
		return IngestResult{}, err
	}
	return w.result(), nil
}

// ErrSiteGone is returned by Ingest, and by every other write that names a
// site, when the site was deleted after the request looked it up: nothing
// is stored.
var ErrSiteGone = &fault.Error{Code: fault.NotFound, Message: "the site was deleted"}

// checkSites refuses a work whose site is no longer known. A request checks
// its credential before it hands its events to the writer; a site deleted
// in between (DeleteSite hides it first) must not get rows again, or a
// later site with the same id would not start empty. Each site is also
// held for the run's transaction against a delete on another instance
// (holdSite), once a run.
func (j *ingestRun) checkSites(w *ingestWork) error {
	db := j.db
	checked := ""
	known := func(id string) error {
		if id == checked { // a request's events share their site
			return nil
		}
		s, ok := db.Site(id)
		if !ok {
			return ErrSiteGone
		}
		if !j.held[id] {
			if err := db.coord().holdSite(j.tx, s); err != nil {
				return err
			}
			if j.held == nil {
				j.held = map[string]bool{}
			}
			j.held[id] = true
		}
		checked = id
		return nil
	}
	for _, e := range w.events {
		if err := known(e.SiteID); err != nil {
			return err
		}
	}
	for _, q := range w.dlq {
		if err := known(q.SiteID); err != nil {
			return err
		}
	}
	return nil
}

type dayKey struct{ site, day, typ string }

type sessionDelta struct {
	sessions, durationMS, events, bounces int64
}

// ingestRun accumulates what a run of works (see intake.runMerged) writes
// besides the event rows.
type ingestRun struct {
	db *DB
	tx *writeTx
	// memo is the intake memo of visitors' newest sessions, or nil where
	// it may not be trusted (see latestSessions).
	memo     *latestSessions
	latest   map[string]session // visitor key -> newest session, for the memo
	stmts    map[*sql.Stmt]*sql.Stmt
	days     map[dayKey]int
	dims     map[dimKey]int
	usage    map[[2]string]int // (site, month) -> accepted
	sessDays map[[2]string]*sessionDelta
	groups   map[[2]string][]*IngestEvent // (site, anon) -> stored events
	order    [][2]string
	linked   map[[3]string]bool
	// hours are the (site, UTC hour) whose day partials the run changes.
	hours map[[2]string]bool
	// held are the sites the run's transaction holds (checkSites).
	held map[string]bool
	// credentials memoises credentialCode for the run (its transaction).
	credentials map[string]string
	// inserts are the new sessions not inserted yet, and memoNew the
	// visitors whose newest session (in latest) is one of them: see
	// insertSessions.
	inserts []newSession
	memoNew []newSession
	// firstSeq is the seq of the run's first stored event: the events
	// below it were stored before the run (see ready).
	firstSeq int64
	// profiles are the profiles of the users the run's identifies name,
	// written at its end (intake_profiles.go); profileRead counts the bytes of
	// traits read for them.
	profiles    map[[2]string]*runProfile
	profileRead int64
	// rows is what a run on PostgreSQL has queued for its set-based
	// writes (intake_rows_pg.go); nil on SQLite.
	rows *runRows
}

// stmt returns s bound to the run's transaction, binding it once per run.
func (j *ingestRun) stmt(s *sql.Stmt) *sql.Stmt {
	if j.stmts == nil {
		j.stmts = map[*sql.Stmt]*sql.Stmt{}
	}
	ts, ok := j.stmts[s]
	if !ok {
		ts = j.tx.Stmt(s)
		j.stmts[s] = ts
	}
	return ts
}

// credentialCode is what events.credential stores for cred (migration
// 0019, docs/storage.md#event-bytes): the decimal code of cred in the
// credentials table, added there the first time it is seen, or NULL for none. A
// code is 1 or 2 bytes where the credential's text took 4 ("site") or 40
// ("key:" and a key id) on every event. The memo lives as long as the run,
// so a code is never remembered past a rollback of the row that made it.
func (j *ingestRun) credentialCode(cred string) (any, error) {
	if cred == "" {
		return nil, nil
	}
	if code, ok := j.credentials[cred]; ok {
		return code, nil
	}
	var code int64
	err := j.stmt(j.db.ingest.credentialCode).QueryRow(cred).Scan(&code)
	if errors.Is(err, sql.ErrNoRows) {
		err = j.stmt(j.db.ingest.newCredential).QueryRow(cred).Scan(&code)
	}
	if err != nil {
		return nil, fmt.Errorf("credential code: %w", err)
	}
	if j.credentials == nil {
		j.credentials = map[string]string{}
	}
	j.credentials[cred] = strconv.FormatInt(code, 10)
	return j.credentials[cred], nil
}

// add stores one work's events and DLQ rows; sessions and rollups wait for
// finish.
func (j *ingestRun) add(w *ingestWork) error {
	if j.db.setRows() {
		return j.addRows(w)
	}
	st := j.db.ingest
	recv := FormatTime(w.received)
	recvMS := w.received.UnixMilli()
	month := w.received.Format(monthLayout)
	if err := j.checkSites(w); err != nil {
		return err
	}
	dedup, insert, link := j.stmt(st.dedup), j.stmt(st.insertEvent), j.stmt(st.link)
	for i := range w.events {
		e := &w.events[i]
		if e.Engagement != nil {
			if err := j.engage(e); err != nil {
				return err
			}
			w.accepted++
			continue
		}
		key := j.db.d.eventIDKey(e.ID)
		if w.imported {
			// An imported id is known for good, not 48 hours (import_events.go).
			r, err := j.stmt(st.imported).Exec(e.SiteID, key)
			if err != nil {
				return fmt.Errorf("imported ids: %w", err)
			}
			if n, _ := r.RowsAffected(); n == 0 {
				w.dup[i] = true
				continue
			}
		}
		r, err := dedup.Exec(e.SiteID, key, recvMS)
		if err != nil {
			return fmt.Errorf("dedup: %w", err)
		}
		if n, _ := r.RowsAffected(); n == 0 {
			w.dup[i] = true
			continue
		}
		ts := FormatTime(e.TS)
		cred, err := j.credentialCode(e.Credential)
		if err != nil {
			return err
		}
		agent, browser, osName, device := eventAgent(e)
		args := []any{key, e.SiteID, e.Type, e.URL, ts, e.AnonID, e.UserID, e.Referrer,
			nullable(e.Country), nullable(e.City), agent, browser, osName, device, w.stored[i], w.receivedAt[i], cred}
		args = j.db.d.eventArgs(args, e, w.received)
		if j.firstSeq == 0 {
			err = j.stmt(st.insertFirstEvent).QueryRow(args...).Scan(&j.firstSeq)
		} else {
			_, err = insert.Exec(args...)
		}
		if err != nil {
			return fmt.Errorf("insert event: %w", err)
		}
		if e.UserID != nil {
			k := [3]string{e.SiteID, e.AnonID, *e.UserID}
			if !j.linked[k] {
				j.linked[k] = true
				if _, err := link.Exec(e.SiteID, e.AnonID, *e.UserID, recvMS); err != nil {
					return fmt.Errorf("identity link: %w", err)
				}
			}
			if e.Type == "identify" {
				dropped, err := j.identify(e, recv)
				if err != nil {
					return fmt.Errorf("user profile: %w", err)
				}
				w.traitsDropped[i] = dropped
			}
		}
		j.countStored(w, e, ts, month)
	}
	if len(w.dlq) > 0 {
		ins := j.stmt(st.dlq)
		for _, q := range w.dlq {
			// cookieless is an integer column: SQLite's driver turns a Go
			// bool into 0/1, pgx refuses to.
			cookieless := 0
			if q.Cookieless {
				cookieless = 1
			}
			// A DLQ row's user_agent is re-sent only as the header of an
			// /events replay, which can never carry NUL, so an s2s row
			// (replayed with its payload, verbatim) loses nothing.
			if _, err := ins.Exec(q.ID, q.SiteID, string(q.Payload), q.Errors, recv, q.AnonID, q.UserID, q.Endpoint, nullable(j.db.d.StoredText(q.UserAgent)),
				cookieless, nullable(q.Agent.Browser), nullable(q.Agent.OS), nullable(q.Agent.DeviceType)); err != nil {
				return fmt.Errorf("insert dlq: %w", err)
			}
		}
	}
	return nil
}

// finish writes the profiles, sessions and rollups of everything added.
func (j *ingestRun) finish() error {
	if err := j.writeProfiles(); err != nil {
		return err
	}
	if j.db.ingest.set != nil {
		if err := j.sessionSets(); err != nil {
			return err
		}
		return j.rollups()
	}
	for _, g := range j.order {
		if err := j.sessions(g[0], g[1], j.groups[g]); err != nil {
			return err
		}
	}
	if err := j.insertSessions(); err != nil {
		return err
	}
	return j.rollups()
}

// session is one row of sessions as the run sees it.
type session struct {
	id         int64 // 0 for a session this run creates
	start, end time.Time
	count      int64
	userID     *string
	orig       *session // the row as loaded, nil for a new session
	// textTimes marks a row stored before migration 0016 that the
	// conversion has not reached: only the full update (updateSession)
	// writes its times.
	textTimes bool
	dirty     bool
	deleted   bool
	visit     visit
}

// sessions assigns events (of one site and anon id) to sessions. It
// loads the visitor's sessions that could touch these events, merges the
// events in (an event within sessionGap of a session joins it; an event
// that bridges two sessions merges them), and writes back only what
// changed. Out-of-order arrival therefore gives the same sessions as
// in-order arrival.
func (j *ingestRun) sessions(site, anon string, events []*IngestEvent) error {
	minTS := events[0].TS
	for _, e := range events {
		minTS = minTime(minTS, e.TS)
	}
	key := site + "\x00" + anon
	floor := minTS.Add(-sessionGap)
	var list []*session
	if c, ok := j.memo.get(key); ok && !c.textTimes && minTS.Truncate(time.Millisecond).After(c.start) {
		// No event precedes the visitor's newest session, and older
		// sessions end more than sessionGap before it starts: only that
		// one can take these events, so the table need not be read.
		// Nor can they change its landing, which the memo lacks.
		if !c.end.Before(floor) {
			orig := c
			c.orig = &orig
			list = append(list, &c)
		}
	} else {
		var err error
		if list, err = j.loadSessions(site, anon, events); err != nil {
			return err
		}
	}
	list, err := j.assign(site, anon, events, list)
	if err != nil {
		return err
	}
	for _, s := range list {
		if s.orig != nil && (s.deleted || s.dirty) {
			j.sessionDelta(site, s.orig, -1)
		}
		switch {
		case s.deleted && s.orig != nil:
			// The sessions queued before go in first, so that each new
			// session takes the id it took when inserted at once.
			if err := j.insertSessions(); err != nil {
				return err
			}
			if _, err := j.stmt(j.db.ingest.deleteSession).Exec(s.id); err != nil {
				return fmt.Errorf("delete session: %w", err)
			}
		case s.deleted:
		case s.dirty && s.orig != nil:
			args := append([]any{s.end.Sub(s.start).Milliseconds(), s.count, s.userID}, s.visit.args(s.start, s.end)...)
			update := j.db.ingest.updateSessionEnd
			switch {
			case s.visit.landing == nil: // a memo's session: never textTimes
				update = j.db.ingest.updateSessionTail
			case s.textTimes || !s.start.Equal(s.orig.start):
				update = j.db.ingest.updateSession
				args = append([]any{s.start.UnixMilli()}, args...)
			}
			if _, err := j.stmt(update).Exec(append(args, s.id)...); err != nil {
				return fmt.Errorf("update session: %w", err)
			}
			s.textTimes = false
			j.sessionDelta(site, s, 1)
		case s.dirty:
			j.inserts = append(j.inserts, newSession{site, anon, key, s})
			j.sessionDelta(site, s, 1)
		}
	}
	// The list holds the visitor's newest session and every session the
	// events could join: its newest live session is the visitor's newest.
	var newest *session
	for _, s := range list {
		if !s.deleted && (newest == nil || s.start.After(newest.start)) {
			newest = s
		}
	}
	if j.latest == nil {
		j.latest = map[string]session{}
	}
	// The memo keeps the visit without its landing (about 200 bytes
	// less an entry): later events cannot change it.
	memoVisit := newest.visit
	memoVisit.landing = nil
	j.latest[key] = session{id: newest.id, start: newest.start, end: newest.end, count: newest.count, userID: newest.userID,
		textTimes: newest.textTimes, visit: memoVisit}
	if newest.id == 0 {
		j.memoNew = append(j.memoNew, newSession{site, anon, key, newest})
	}
	return nil
}

// assign merges events (of one site and anon id) into list, the
// visitor's sessions as loaded that the events can touch: an event within
// sessionGap of a session joins it, one that bridges two sessions folds
// the other into the first of them in list's order (marked deleted), which
// keeps its id. It returns list with the sessions the events start (id 0);
// the changed ones are dirty.
func (j *ingestRun) assign(site, anon string, events []*IngestEvent, list []*session) ([]*session, error) {
	for _, e := range events {
		ts := e.TS.Truncate(time.Millisecond)
		var into *session
		for _, s := range list {
			if s.deleted || ts.Before(s.start.Add(-sessionGap)) || ts.After(s.end.Add(sessionGap)) {
				continue
			}
			if err := j.ready(site, anon, s); err != nil {
				return nil, err
			}
			if into == nil {
				into = s
				into.start, into.end = minTime(into.start, ts), maxTime(into.end, ts)
				into.count++
			} else { // the event bridges two sessions: fold s into the first
				into.start, into.end = minTime(into.start, s.start), maxTime(into.end, s.end)
				into.count += s.count
				if into.userID == nil {
					into.userID = s.userID
				}
				into.visit.merge(s.visit)
				s.deleted = true
			}
			into.dirty = true
		}
		if into == nil {
			into = &session{start: ts, end: ts, count: 1, dirty: true, visit: newVisit()}
			list = append(list, into)
		}
		into.visit.add(e, ts)
		if e.UserID != nil && into.userID == nil {
			into.userID = e.UserID
		}
	}
	return list, nil
}

// newSession is a session a run creates, of the visitor key (site, anon).
type newSession struct {
	site, anon, key string
	s               *session
}

// insertSessions inserts the queued new sessions and gives each its id.
// The rows go in the order they were queued, and the queue is emptied
// before every delete of a session, so each takes the id SQLite gave it
// when inserted at once (the largest id plus one: the largest may have
// been deleted). The queue lets a backend without LastInsertId read the
// ids back with RETURNING in statements of up to 64 rows
// (prepareSessionReturning) rather than a result set per session.
func (j *ingestRun) insertSessions() error {
	if !j.db.ingest.returning {
		ins := j.stmt(j.db.ingest.insertSession)
		for _, n := range j.inserts {
			s := n.s
			args := append([]any{n.site, n.anon, s.userID, s.start.UnixMilli(), s.end.Sub(s.start).Milliseconds(), s.count},
				s.visit.args(s.start, s.end)...)
			r, err := ins.Exec(args...)
			if err != nil {
				return fmt.Errorf("insert session: %w", err)
			}
			if s.id, err = r.LastInsertId(); err != nil {
				return fmt.Errorf("insert session: %w", err)
			}
		}
		j.inserts = j.inserts[:0]
	}
	for len(j.inserts) > 0 {
		k := min(bits.Len(uint(len(j.inserts)))-1, len(j.db.ingest.insertSessions)-1)
		part := j.inserts[:1<<k]
		j.inserts = j.inserts[1<<k:]
		args := make([]any, 0, len(part)*(6+sessionVisitArgs))
		byKey := make(map[sessionKey]*session, len(part))
		for _, n := range part {
			s := n.s
			args = append(args, n.site, n.anon, s.userID, s.start.UnixMilli(), s.end.Sub(s.start).Milliseconds(), s.count)
			args = append(args, s.visit.args(s.start, s.end)...)
			// RETURNING gives anon_id back as stored (StoredText).
			byKey[sessionKey{n.site, j.db.d.StoredText(n.anon), s.start.UnixMilli()}] = s
		}
		rows, err := j.stmt(j.db.ingest.insertSessions[k]).Query(args...)
		if err != nil {
			return fmt.Errorf("insert session: %w", err)
		}
		for rows.Next() {
			var id int64
			var k sessionKey
			if err := rows.Scan(&id, &k.site, &k.anon, &k.startMS); err != nil {
				rows.Close()
				return fmt.Errorf("insert session: %w", err)
			}
			if s := byKey[k]; s != nil {
				s.id = id
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("insert session: %w", err)
		}
		for _, n := range part {
			if n.s.id == 0 {
				return fmt.Errorf("insert session: no id returned")
			}
		}
	}
	// The memo keeps the ids of the newest sessions among them.
	for _, n := range j.memoNew {
		m := j.latest[n.key]
		m.id = n.s.id
		j.latest[n.key] = m
	}
	j.memoNew = j.memoNew[:0]
	return nil
}

// sessionKey tells a visitor's sessions apart: they never share a start.
type sessionKey struct {
	site, anon string
	startMS    int64
}

// ready computes the visit of a loaded session stored before migration
// 0013 that the backfill has not reached yet, from its events stored
// before this run, so that the events it takes now are added to the whole
// visit (docs/intake.md#visits, backfill). The memo never holds such a session.
func (j *ingestRun) ready(site, anon string, s *session) error {
	if s.visit.ready {
		return nil
	}
	v, err := visitOfEvents(context.Background(), j.db.d, j.tx, site, anon, s.start, s.end, j.firstSeq)
	if err != nil {
		return err
	}
	s.visit = v
	return nil
}

// loadSessions reads the visitor's sessions that the events can touch, and
// the visitor's newest session, which the memo keeps. Sessions of one
// visitor do not overlap and lie more than sessionGap apart, so an event
// touches at most two; reading only those keeps an event far in the past of
// a visitor with many later sessions from holding the writer. The events
// are read in clusters (times at most 2×sessionGap apart), one bounded
// range read each: every session starting within sessionGap of a cluster
// touches one of its events, so the rows read are at most the sessions the
// events change, plus one per cluster and the newest.
func (j *ingestRun) loadSessions(site, anon string, events []*IngestEvent) ([]*session, error) {
	var list []*session
	seen := map[int64]bool{}
	keep := func(s *session) {
		if !seen[s.id] {
			seen[s.id] = true
			orig := *s
			s.orig = &orig
			list = append(list, s)
		}
	}
	if !j.db.setRows() {
		// Most visitors the memo lacks are new. On SQLite a one-column
		// probe tells so for a fraction of the full read: the driver builds
		// every result column's name and declared type per query, 29 for a
		// session's read (docs/benchmarks.md: about 20,000 instructions per
		// event less in the collector's benchmark). On PostgreSQL it would
		// be one more round trip for a known visitor.
		var one int
		switch err := j.stmt(j.db.ingest.hasSession).QueryRow(site, anon).Scan(&one); {
		case errors.Is(err, sql.ErrNoRows):
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("load sessions: %w", err)
		}
	}
	newest, err := j.readSessions(j.db.ingest.newestSession, time.Time{}, site, anon)
	if err != nil {
		return nil, err
	}
	for _, s := range newest {
		keep(s)
	}
	times := make([]time.Time, len(events))
	for i, e := range events {
		times[i] = e.TS.Truncate(time.Millisecond)
	}
	slices.SortFunc(times, time.Time.Compare)
	for i := 0; i < len(times); {
		k := i + 1
		for k < len(times) && times[k].Sub(times[k-1]) <= 2*sessionGap {
			k++
		}
		floor, ceil := times[i].Add(-sessionGap), times[k-1].Add(sessionGap)
		i = k
		if len(newest) == 0 || newest[0].start.Before(floor) {
			// Every other session ends more than sessionGap before the
			// newest starts, so before floor: the newest, already kept,
			// is the only one these events can touch. This is the usual
			// case of an event in order whose visitor the memo lacks.
			continue
		}
		near, err := j.readSessions(j.db.ingest.loadSessions, floor, site, anon, ceil.UnixMilli())
		if err != nil {
			return nil, err
		}
		for _, s := range near {
			keep(s)
		}
	}
	return list, nil
}

// readSessions runs a query of sessions ordered newest first and returns
// those that end at floor or later. It stops at the first one that starts
// before floor: older ones end more than sessionGap before it starts.
func (j *ingestRun) readSessions(stmt *sql.Stmt, floor time.Time, args ...any) ([]*session, error) {
	rows, err := j.stmt(stmt).Query(args...)
	if err != nil {
		return nil, fmt.Errorf("load sessions: %w", err)
	}
	defer rows.Close()
	var list []*session
	for rows.Next() {
		s, err := j.scanSession(rows)
		if err != nil {
			return nil, err
		}
		if s.end.Before(floor) {
			break
		}
		list = append(list, s)
		if s.start.Before(floor) {
			break
		}
	}
	return list, rows.Err()
}

// scanSession reads a row of sessionReadColumns, after the scan
// destinations lead gives the row's first columns.
func (j *ingestRun) scanSession(rows *sql.Rows, lead ...any) (*session, error) {
	j.db.hooks.sessionRowsRead.Add(1)
	s := &session{}
	var start, end int64
	var vs visitScan
	dests := append(lead, &s.id, &start, &end, &s.textTimes, &s.count, &s.userID)
	if err := rows.Scan(append(dests, vs.dests()...)...); err != nil {
		return nil, err
	}
	s.start, s.end = msTime(start), msTime(end)
	s.visit = vs.visit(s.start, s.end, s.count)
	return s, nil
}

// sessionDelta adds (sign 1) or removes (sign -1) s's contribution to the
// daily session rollup of its start day.
func (j *ingestRun) sessionDelta(site string, s *session, sign int64) {
	start := FormatTime(s.start)
	// The day partials of every local day the visit overlaps: those of
	// events group each of its events by the visit's attributes (entry and
	// exit page, source, country...), which this change may alter, and a
	// visit may run over days (a late event before its start changes its
	// entry page for the events of the next day too). A mark every 12
	// hours and one at the end hit every local day of the span, since a
	// local day lasts at least 23 hours; a visit within one hour marks one.
	for t := s.start; t.Before(s.end); t = t.Add(12 * time.Hour) {
		j.hours[[2]string{site, FormatTime(t)[:hourKeyLen]}] = true
	}
	j.hours[[2]string{site, FormatTime(s.end)[:hourKeyLen]}] = true
	k := [2]string{site, start[:10]}
	d := j.sessDays[k]
	if d == nil {
		d = &sessionDelta{}
		j.sessDays[k] = d
	}
	d.sessions += sign
	d.durationMS += sign * s.end.Sub(s.start).Milliseconds()
	d.events += sign * s.count
	if s.count == 1 {
		d.bounces += sign
	}
}

// rollups writes the run's per-day and per-month aggregates, one upsert per
// key rather than one per event, each table's in the order of its keys
// (intake_lock_order.go).
func (j *ingestRun) rollups() error {
	if j.db.setRows() {
		return j.rollupsRows()
	}
	de := j.stmt(j.db.ingest.dailyEvents)
	for _, k := range sortedKeys(j.days, compareDayKeys) {
		if _, err := de.Exec(k.site, k.day, k.typ, j.days[k]); err != nil {
			return fmt.Errorf("daily events: %w", err)
		}
	}
	dd := j.stmt(j.db.ingest.dailyDims)
	for _, k := range sortedKeys(j.dims, compareDimKeys) {
		if _, err := dd.Exec(k.site, k.day, k.dim, k.value, j.dims[k]); err != nil {
			return fmt.Errorf("daily dimensions: %w", err)
		}
	}
	ds := j.stmt(j.db.ingest.dailySessions)
	for _, k := range sortedKeys(j.sessDays, comparePairs) {
		d := j.sessDays[k]
		if *d == (sessionDelta{}) {
			continue
		}
		if _, err := ds.Exec(k[0], k[1], d.sessions, d.durationMS, d.events, d.bounces); err != nil {
			return fmt.Errorf("daily sessions: %w", err)
		}
	}
	// The day partials of every local day that holds an hour whose events
	// or visits changed: the events' UTC hours and the start hours of the
	// visits they changed (a visit across midnight changes its start day's
	// figures). Hours, not UTC dates: in a zone behind UTC, today's intake
	// would otherwise drop yesterday's partials, which share a UTC date.
	dp := j.stmt(j.db.ingest.dropPartials)
	if err := dropDays(j.tx, func(args ...any) error { _, err := dp.Exec(args...); return err }, j.hours); err != nil {
		return fmt.Errorf("day partials: %w", err)
	}
	us := j.stmt(j.db.ingest.usage)
	for _, k := range sortedKeys(j.usage, comparePairs) {
		if _, err := us.Exec(k[0], k[1], j.usage[k]); err != nil {
			return fmt.Errorf("site usage: %w", err)
		}
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// countStored counts stored event e of w (its UTC time ts as stored, and
// the month of its receipt) wherever a run stores it, row by row or
// set-based: the quota, the rollups, the day partials it changes and its
// visitor's events for the sessions.
func (j *ingestRun) countStored(w *ingestWork, e *IngestEvent, ts, month string) {
	w.accepted++
	if !w.imported { // history uses no quota (import_events.go)
		w.usage[e.SiteID]++
		j.usage[[2]string{e.SiteID, month}]++
	}
	j.days[dayKey{e.SiteID, ts[:10], e.Type}]++
	j.hours[[2]string{e.SiteID, ts[:hourKeyLen]}] = true
	if e.Type == "pageview" {
		for d, v := range dimensionValues(e.URL, e.Referrer, e.Country, e.Browser, e.OS, e.DeviceType) {
			j.dims[dimKey{e.SiteID, ts[:10], Dimensions[d], v}]++
		}
	}
	g := [2]string{e.SiteID, e.AnonID}
	if _, ok := j.groups[g]; !ok {
		j.order = append(j.order, g)
	}
	j.groups[g] = append(j.groups[g], e)
}
