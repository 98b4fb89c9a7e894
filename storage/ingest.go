package storage

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"time"
)

// SessionGap is the inactivity that ends a session (CONTRACT 5).
const SessionGap = 30 * time.Minute

// DedupWindow is how long a stored event's id suppresses repeats. The
// contract asks for at least 24 h.
const DedupWindow = 48 * time.Hour

// IngestEvent is one validated, enriched event ready to store.
type IngestEvent struct {
	ID, SiteID, Type, AnonID string
	UserID, URL, Referrer    *string
	TS                       time.Time
	Raw                      []byte
	// Country, City, Browser, OS, DeviceType: "" is stored as NULL.
	Country, City, Browser, OS, DeviceType string
	// Traits is the traits object of an identify event, or nil.
	Traits []byte
	// Credential records who sent the event: "site" (legacy site bearer)
	// or "key:<key id>".
	Credential string
}

// Quarantined is an event stored in the DLQ instead of events.
type Quarantined struct {
	ID, SiteID string
	Payload    []byte
	Errors     string // JSON array of {path, message}
	AnonID     string
	UserID     *string
	Endpoint   string
}

// IngestResult tells, per event, whether it was stored or suppressed as a
// duplicate.
type IngestResult struct {
	Duplicate []bool
	Accepted  int
}

// ingestStmts are prepared once on the write connection.
type ingestStmts struct {
	dedup, insertEvent, link, profile, loadSessions, insertSession, updateSession, deleteSession,
	dailyEvents, dailySessions, usage, dlq *sql.Stmt
}

func prepareIngest(ctx context.Context, db *sql.DB) (*ingestStmts, error) {
	var s ingestStmts
	stmts := []struct {
		dst **sql.Stmt
		sql string
	}{
		{&s.dedup, `INSERT INTO event_ids(site_id, id, received_ms) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`},
		{&s.insertEvent, `INSERT INTO events(id, site_id, type, url, ts, anon_id, user_id, referrer, country, city, browser, os, device_type, raw, received_at, credential)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		{&s.link, `INSERT INTO identity_links(site_id, anon_id, user_id, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`},
		{&s.profile, `INSERT INTO user_profiles(site_id, user_id, traits, created_at, updated_at) VALUES (?, ?, json(?), ?, ?)
			ON CONFLICT(site_id, user_id) DO UPDATE SET traits = json_patch(traits, excluded.traits), updated_at = excluded.updated_at`},
		{&s.loadSessions, `SELECT id, started_at, ended_at, event_count, user_id FROM sessions
			WHERE site_id = ? AND anon_id = ? AND started_at <= ? ORDER BY started_at DESC`},
		{&s.insertSession, `INSERT INTO sessions(site_id, anon_id, user_id, started_at, ended_at, event_count) VALUES (?, ?, ?, ?, ?, ?)`},
		{&s.updateSession, `UPDATE sessions SET started_at = ?, ended_at = ?, event_count = ?, user_id = ? WHERE id = ?`},
		{&s.deleteSession, `DELETE FROM sessions WHERE id = ?`},
		{&s.dailyEvents, `INSERT INTO daily_events(site_id, day, type, count) VALUES (?, ?, ?, ?)
			ON CONFLICT(site_id, day, type) DO UPDATE SET count = count + excluded.count`},
		{&s.dailySessions, `INSERT INTO daily_sessions(site_id, day, sessions, duration_ms, events, bounces) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT(site_id, day) DO UPDATE SET sessions = sessions + excluded.sessions,
			duration_ms = duration_ms + excluded.duration_ms, events = events + excluded.events, bounces = bounces + excluded.bounces`},
		{&s.usage, `INSERT INTO site_usage(site_id, month, accepted) VALUES (?, ?, ?)
			ON CONFLICT(site_id, month) DO UPDATE SET accepted = accepted + excluded.accepted`},
		{&s.dlq, `INSERT INTO dlq(id, site_id, payload, error, received_at, anon_id, user_id, endpoint) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT(site_id, id) DO UPDATE SET payload = excluded.payload, error = excluded.error,
			received_at = excluded.received_at, anon_id = excluded.anon_id, user_id = excluded.user_id, endpoint = excluded.endpoint`},
	}
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
// rows in one writer job, and keeps identity links, profiles, sessions and
// the daily rollups current in the same transaction. It returns after the
// commit. A full write queue gives ErrQueueFull at once. stats, when set,
// receives the duration of the group commit.
func (db *DB) Ingest(ctx context.Context, events []IngestEvent, dlq []Quarantined, stats func(time.Duration)) (IngestResult, error) {
	res := IngestResult{Duplicate: make([]bool, len(events))}
	if len(events) == 0 && len(dlq) == 0 {
		return res, nil
	}
	received := db.now().UTC()
	err := db.writer.SubmitTimed(ctx, len(events)+len(dlq), func(tx *Tx) error {
		clear(res.Duplicate)
		res.Accepted = 0
		j := &ingestJob{db: db, tx: tx, received: received}
		if err := j.run(events, dlq, res.Duplicate); err != nil {
			return err
		}
		res.Accepted = j.accepted
		usage := j.usage
		tx.OnCommit(func() { db.quota.commit(received, usage) })
		return nil
	}, stats)
	if err != nil {
		return IngestResult{}, err
	}
	return res, nil
}

type dayKey struct{ site, day, typ string }

type sessionDelta struct {
	sessions, durationMS, events, bounces int64
}

type ingestJob struct {
	db       *DB
	tx       *Tx
	received time.Time
	accepted int
	usage    map[string]int
	days     map[dayKey]int
	sessDays map[[2]string]*sessionDelta
}

func (j *ingestJob) stmt(s *sql.Stmt) *sql.Stmt { return j.tx.Stmt(s) }

func (j *ingestJob) run(events []IngestEvent, dlq []Quarantined, dup []bool) error {
	st := j.db.ingest
	recv := FormatTime(j.received)
	recvMS := j.received.UnixMilli()
	j.usage = map[string]int{}
	j.days = map[dayKey]int{}
	j.sessDays = map[[2]string]*sessionDelta{}
	dedup, insert, link, profile := j.stmt(st.dedup), j.stmt(st.insertEvent), j.stmt(st.link), j.stmt(st.profile)
	linked := map[[3]string]bool{}
	groups := map[[2]string][]int{}
	var order [][2]string
	for i := range events {
		e := &events[i]
		r, err := dedup.Exec(e.SiteID, e.ID, recvMS)
		if err != nil {
			return fmt.Errorf("dedup: %w", err)
		}
		if n, _ := r.RowsAffected(); n == 0 {
			dup[i] = true
			continue
		}
		ts := FormatTime(e.TS)
		if _, err := insert.Exec(e.ID, e.SiteID, e.Type, e.URL, ts, e.AnonID, e.UserID, e.Referrer,
			nullable(e.Country), nullable(e.City), nullable(e.Browser), nullable(e.OS), nullable(e.DeviceType),
			string(e.Raw), recv, nullable(e.Credential)); err != nil {
			return fmt.Errorf("insert event: %w", err)
		}
		if e.UserID != nil {
			k := [3]string{e.SiteID, e.AnonID, *e.UserID}
			if !linked[k] {
				linked[k] = true
				if _, err := link.Exec(e.SiteID, e.AnonID, *e.UserID, recv); err != nil {
					return fmt.Errorf("identity link: %w", err)
				}
			}
			if e.Type == "identify" {
				traits := "{}"
				if e.Traits != nil {
					traits = string(e.Traits)
				}
				if _, err := profile.Exec(e.SiteID, *e.UserID, traits, recv, recv); err != nil {
					return fmt.Errorf("user profile: %w", err)
				}
			}
		}
		j.accepted++
		j.usage[e.SiteID]++
		j.days[dayKey{e.SiteID, ts[:10], e.Type}]++
		g := [2]string{e.SiteID, e.AnonID}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], i)
	}
	for _, g := range order {
		if err := j.sessions(g[0], g[1], events, groups[g]); err != nil {
			return err
		}
	}
	if err := j.rollups(); err != nil {
		return err
	}
	if len(dlq) > 0 {
		ins := j.stmt(st.dlq)
		for _, q := range dlq {
			if _, err := ins.Exec(q.ID, q.SiteID, string(q.Payload), q.Errors, recv, q.AnonID, q.UserID, q.Endpoint); err != nil {
				return fmt.Errorf("insert dlq: %w", err)
			}
		}
	}
	return nil
}

// session is one row of sessions as the job sees it.
type session struct {
	id         int64 // 0 for a session this job creates
	start, end time.Time
	count      int64
	userID     *string
	orig       *session // the row as loaded, nil for a new session
	dirty      bool
	deleted    bool
}

// sessions assigns the events idx (one site and anon id) to sessions. It
// loads the visitor's sessions that could touch these events, merges the
// events in (an event within SessionGap of a session joins it; an event
// that bridges two sessions merges them), and writes back only what
// changed. Out-of-order arrival therefore gives the same sessions as
// in-order arrival.
func (j *ingestJob) sessions(site, anon string, events []IngestEvent, idx []int) error {
	minTS, maxTS := events[idx[0]].TS, events[idx[0]].TS
	for _, i := range idx {
		minTS = minTime(minTS, events[i].TS)
		maxTS = maxTime(maxTS, events[i].TS)
	}
	rows, err := j.stmt(j.db.ingest.loadSessions).Query(site, anon, FormatTime(maxTS.Add(SessionGap)))
	if err != nil {
		return fmt.Errorf("load sessions: %w", err)
	}
	var list []*session
	floor := minTS.Add(-SessionGap)
	for rows.Next() {
		s := &session{}
		var start, end string
		if err := rows.Scan(&s.id, &start, &end, &s.count, &s.userID); err != nil {
			rows.Close()
			return err
		}
		s.start, _ = time.Parse(TimeLayout, start)
		s.end, _ = time.Parse(TimeLayout, end)
		if s.end.Before(floor) {
			break // sessions of one visitor do not overlap: all older ones end earlier
		}
		orig := *s
		s.orig = &orig
		list = append(list, s)
	}
	rows.Close()

	for _, i := range idx {
		e := &events[i]
		ts := e.TS.Truncate(time.Millisecond)
		var into *session
		for _, s := range list {
			if s.deleted || ts.Before(s.start.Add(-SessionGap)) || ts.After(s.end.Add(SessionGap)) {
				continue
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
				s.deleted = true
			}
			into.dirty = true
		}
		if into == nil {
			into = &session{start: ts, end: ts, count: 1, dirty: true}
			list = append(list, into)
		}
		if e.UserID != nil && into.userID == nil {
			into.userID = e.UserID
		}
	}
	for _, s := range list {
		if s.orig != nil && (s.deleted || s.dirty) {
			j.sessionDelta(site, s.orig, -1)
		}
		switch {
		case s.deleted && s.orig != nil:
			if _, err := j.stmt(j.db.ingest.deleteSession).Exec(s.id); err != nil {
				return fmt.Errorf("delete session: %w", err)
			}
		case s.deleted:
		case s.dirty && s.orig != nil:
			if _, err := j.stmt(j.db.ingest.updateSession).Exec(FormatTime(s.start), FormatTime(s.end), s.count, s.userID, s.id); err != nil {
				return fmt.Errorf("update session: %w", err)
			}
			j.sessionDelta(site, s, 1)
		case s.dirty:
			if _, err := j.stmt(j.db.ingest.insertSession).Exec(site, anon, s.userID, FormatTime(s.start), FormatTime(s.end), s.count); err != nil {
				return fmt.Errorf("insert session: %w", err)
			}
			j.sessionDelta(site, s, 1)
		}
	}
	return nil
}

// sessionDelta adds (sign 1) or removes (sign -1) s's contribution to the
// daily session rollup of its start day.
func (j *ingestJob) sessionDelta(site string, s *session, sign int64) {
	k := [2]string{site, FormatTime(s.start)[:10]}
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

// rollups writes the job's per-day and per-month aggregates, one upsert per
// key rather than one per event.
func (j *ingestJob) rollups() error {
	keys := make([]dayKey, 0, len(j.days))
	for k := range j.days {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		return keys[a].site+keys[a].day+keys[a].typ < keys[b].site+keys[b].day+keys[b].typ
	})
	de := j.stmt(j.db.ingest.dailyEvents)
	for _, k := range keys {
		if _, err := de.Exec(k.site, k.day, k.typ, j.days[k]); err != nil {
			return fmt.Errorf("daily events: %w", err)
		}
	}
	ds := j.stmt(j.db.ingest.dailySessions)
	for k, d := range j.sessDays {
		if *d == (sessionDelta{}) {
			continue
		}
		if _, err := ds.Exec(k[0], k[1], d.sessions, d.durationMS, d.events, d.bounces); err != nil {
			return fmt.Errorf("daily sessions: %w", err)
		}
	}
	month := j.received.Format("2006-01")
	us := j.stmt(j.db.ingest.usage)
	for site, n := range j.usage {
		if _, err := us.Exec(site, month, n); err != nil {
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
