package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tally-analytics/tally/fault"
)

// Saved funnels of a site (docs/query-api.md#saved-funnels), as Plausible
// keeps them in a site's settings: a name and 2 to 8 steps, each one of the
// site's goals. A step is stored as its goal's id, so a funnel keeps meaning
// what it meant when it was saved; goals cannot be renamed, and a goal that
// is a step of a saved funnel cannot be deleted (goal_in_funnel) until the
// funnel is changed or deleted. A saved funnel is run as the funnel
// endpoint runs any other: its steps' names are POST /funnel's steps.

// MaxFunnelsPerSite bounds a site's saved funnels: the dashboard's picker
// lists them all.
const MaxFunnelsPerSite = 100

// maxFunnelName bounds a funnel's name, in bytes.
const maxFunnelName = 120

// SavedFunnel is one saved funnel of a site.
type SavedFunnel struct {
	ID     int64
	SiteID string
	Name   string
	// Steps are the steps' goals, in order.
	Steps     []FunnelGoal
	CreatedAt string
	UpdatedAt string
}

// FunnelGoal is one step of a saved funnel: its goal's id and name.
type FunnelGoal struct {
	GoalID int64
	Name   string
}

// FunnelStepRef names a step's goal as a client sent it: by id or by name
// (exactly one set).
type FunnelStepRef struct {
	GoalID *int64
	Name   *string
}

// FunnelChange is a saved funnel to create (both fields set) or the fields
// of one to change (nil: left as it is).
type FunnelChange struct {
	Name  *string
	Steps []FunnelStepRef
}

func invalidFunnel(path, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return fault.WithDetails(fault.InvalidFunnel, msg, []fault.Detail{{Path: path, Message: msg}})
}

// funnelName checks a funnel's name: trimmed, 1 to 120 bytes.
func funnelName(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > maxFunnelName || !utf8.ValidString(s) {
		return "", invalidFunnel("/name", "name must be a non-empty string of at most %d bytes", maxFunnelName)
	}
	return s, nil
}

// resolveSteps checks refs against the site's goals: 2 to 8 steps, each a
// goal of the site (a goal may repeat, as in POST /funnel).
func resolveSteps(refs []FunnelStepRef, goals []Goal) ([]FunnelGoal, error) {
	if len(refs) < minFunnelSteps || len(refs) > MaxFunnelSteps {
		return nil, invalidFunnel("/steps", "steps must be an array of %d to %d goals (ids or names), not %d", minFunnelSteps, MaxFunnelSteps, len(refs))
	}
	steps := make([]FunnelGoal, len(refs))
	for i, ref := range refs {
		found := false
		for _, g := range goals {
			if (ref.GoalID != nil && g.ID == *ref.GoalID) || (ref.Name != nil && g.Name == strings.TrimSpace(*ref.Name)) {
				steps[i], found = FunnelGoal{GoalID: g.ID, Name: g.Name}, true
				break
			}
		}
		if !found {
			what := ""
			if ref.GoalID != nil {
				what = fmt.Sprintf("id %d", *ref.GoalID)
			} else {
				what = fmt.Sprintf("name %q", *ref.Name)
			}
			return nil, invalidFunnel(fmt.Sprintf("/steps/%d", i), "step %d: this site has no goal with %s (GET /v1/sites/:siteId/goals lists them)", i+1, what)
		}
	}
	return steps, nil
}

// stepIDs is the steps column of steps: the JSON array of their goal ids.
func stepIDs(steps []FunnelGoal) string {
	ids := make([]int64, len(steps))
	for i, s := range steps {
		ids[i] = s.GoalID
	}
	b, _ := json.Marshal(ids)
	return string(b)
}

// funnelMeta is a funnel as its audit rows record it.
func funnelMeta(f SavedFunnel) map[string]any {
	ids := make([]int64, len(f.Steps))
	for i, s := range f.Steps {
		ids[i] = s.GoalID
	}
	return map[string]any{"funnel_id": f.ID, "name": f.Name, "goal_ids": ids}
}

// txGoals reads the site's goals inside a write.
func txGoals(tx *writeTx, site string) ([]Goal, error) {
	rows, err := tx.Query(goalsSQL, site)
	if err != nil {
		return nil, err
	}
	return scanGoals(rows)
}

// funnelNameTaken reports whether another funnel of site (not id) has name.
func funnelNameTaken(tx *writeTx, site, name string, id int64) error {
	var n int
	if err := tx.QueryRow(`SELECT COUNT(*) FROM funnels WHERE site_id = ? AND name = ? AND id <> ?`, site, name, id).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return fault.WithDetails(fault.FunnelNameTaken, fmt.Sprintf("this site already has a funnel named %q; funnel names are unique per site", name),
			[]fault.Detail{{Path: "/name", Message: "taken"}})
	}
	return nil
}

// CreateFunnel stores a saved funnel of site and audits it (funnel.create).
func (db *DB) CreateFunnel(ctx context.Context, actor Actor, site *Site, c FunnelChange) (*SavedFunnel, error) {
	if c.Name == nil {
		return nil, invalidFunnel("/name", "name is required")
	}
	name, err := funnelName(*c.Name)
	if err != nil {
		return nil, err
	}
	if c.Steps == nil {
		return nil, invalidFunnel("/steps", "steps is required: an array of %d to %d goals (ids or names)", minFunnelSteps, MaxFunnelSteps)
	}
	f := SavedFunnel{SiteID: site.ID, Name: name, CreatedAt: FormatTime(db.now())}
	f.UpdatedAt = f.CreatedAt
	err = db.writer.do(ctx, func(tx *writeTx) error {
		if err := db.checkSite(site); err != nil {
			return err
		}
		goals, err := txGoals(tx, site.ID)
		if err != nil {
			return err
		}
		if f.Steps, err = resolveSteps(c.Steps, goals); err != nil {
			return err
		}
		if err := funnelNameTaken(tx, site.ID, name, 0); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(`SELECT COUNT(*) FROM funnels WHERE site_id = ?`, site.ID).Scan(&n); err != nil {
			return err
		}
		if n >= MaxFunnelsPerSite {
			return fault.Errorf(fault.FunnelLimitReached, "a site may have at most %d saved funnels; delete one first", MaxFunnelsPerSite)
		}
		if err := tx.QueryRow(`INSERT INTO funnels(site_id, name, steps, created_at, updated_at) VALUES (?, ?, ?, ?, ?) RETURNING id`,
			site.ID, f.Name, stepIDs(f.Steps), f.CreatedAt, f.UpdatedAt).Scan(&f.ID); err != nil {
			return err
		}
		return db.audit(tx, site.WorkspaceID, actor, "funnel.create", site.ID, funnelMeta(f))
	})
	if err != nil {
		return nil, err
	}
	return &f, nil
}

// funnelRow is a funnels row as read, its steps the ids.
type funnelRow struct {
	f   SavedFunnel
	ids []int64
}

// readFunnels reads the funnels of site (one when id > 0), by name.
func readFunnels(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, site string, id int64) ([]funnelRow, error) {
	query := `SELECT id, site_id, name, steps, created_at, updated_at FROM funnels WHERE site_id = ?`
	args := []any{site}
	if id > 0 {
		query += ` AND id = ?`
		args = append(args, id)
	}
	rows, err := q.QueryContext(ctx, query+` ORDER BY name, id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var list []funnelRow
	for rows.Next() {
		var r funnelRow
		var steps string
		if err := rows.Scan(&r.f.ID, &r.f.SiteID, &r.f.Name, &steps, &r.f.CreatedAt, &r.f.UpdatedAt); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(steps), &r.ids); err != nil {
			return nil, fmt.Errorf("funnel %d: steps %q: %w", r.f.ID, steps, err)
		}
		list = append(list, r)
	}
	return list, rows.Err()
}

// named fills r's steps with the names of goals.
func (r funnelRow) named(goals []Goal) SavedFunnel {
	f := r.f
	f.Steps = make([]FunnelGoal, len(r.ids))
	for i, id := range r.ids {
		f.Steps[i] = FunnelGoal{GoalID: id}
		for _, g := range goals {
			if g.ID == id {
				f.Steps[i].Name = g.Name
			}
		}
	}
	return f
}

// Funnels lists site's saved funnels by name, each step with its goal's
// name.
func (db *DB) Funnels(ctx context.Context, site string) ([]SavedFunnel, error) {
	rows, err := readFunnels(ctx, db.read, site, 0)
	if err != nil {
		return nil, err
	}
	goals, err := db.Goals(ctx, site)
	if err != nil {
		return nil, err
	}
	list := make([]SavedFunnel, len(rows))
	for i, r := range rows {
		list[i] = r.named(goals)
	}
	return list, nil
}

var errNoFunnel = fault.Errorf(fault.NotFound, "no funnel with that id on this site")

// txQuerier runs a write transaction's queries under the interface
// readFunnels takes.
type txQuerier struct{ tx *writeTx }

func (q txQuerier) QueryContext(_ context.Context, query string, args ...any) (*sql.Rows, error) {
	return q.tx.Query(query, args...)
}

// UpdateFunnel changes the fields c sets of funnel id of site and audits
// it (funnel.update: the fields changed, and the previous name when it
// changed); one of another site, or none, is not_found.
func (db *DB) UpdateFunnel(ctx context.Context, actor Actor, site *Site, id int64, c FunnelChange) (*SavedFunnel, error) {
	if c.Name == nil && c.Steps == nil {
		return nil, invalidFunnel("", "nothing to change: send name or steps")
	}
	var name string
	var err error
	if c.Name != nil {
		if name, err = funnelName(*c.Name); err != nil {
			return nil, err
		}
	}
	var f SavedFunnel
	err = db.writer.do(ctx, func(tx *writeTx) error {
		if err := db.checkSite(site); err != nil {
			return err
		}
		rows, err := readFunnels(ctx, txQuerier{tx}, site.ID, id)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return errNoFunnel
		}
		goals, err := txGoals(tx, site.ID)
		if err != nil {
			return err
		}
		f = rows[0].named(goals)
		meta := map[string]any{}
		var changed []string
		if c.Name != nil {
			changed = append(changed, "name")
			if name != f.Name {
				if err := funnelNameTaken(tx, site.ID, name, id); err != nil {
					return err
				}
				meta["previous_name"] = f.Name
			}
			f.Name = name
		}
		if c.Steps != nil {
			changed = append(changed, "steps")
			if f.Steps, err = resolveSteps(c.Steps, goals); err != nil {
				return err
			}
		}
		f.UpdatedAt = FormatTime(db.now())
		if _, err := tx.Exec(`UPDATE funnels SET name = ?, steps = ?, updated_at = ? WHERE id = ?`,
			f.Name, stepIDs(f.Steps), f.UpdatedAt, id); err != nil {
			return err
		}
		for k, v := range funnelMeta(f) {
			meta[k] = v
		}
		meta["changed"] = changed
		return db.audit(tx, site.WorkspaceID, actor, "funnel.update", site.ID, meta)
	})
	if err != nil {
		return nil, err
	}
	return &f, nil
}

// DeleteFunnel deletes funnel id of site and audits it (funnel.delete);
// one of another site, or none, is not_found.
func (db *DB) DeleteFunnel(ctx context.Context, actor Actor, site *Site, id int64) error {
	return db.writer.do(ctx, func(tx *writeTx) error {
		if err := db.checkSite(site); err != nil {
			return err
		}
		rows, err := readFunnels(ctx, txQuerier{tx}, site.ID, id)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return errNoFunnel
		}
		if _, err := tx.Exec(`DELETE FROM funnels WHERE id = ?`, id); err != nil {
			return err
		}
		f := rows[0].f
		f.Steps = make([]FunnelGoal, len(rows[0].ids))
		for i, gid := range rows[0].ids {
			f.Steps[i].GoalID = gid
		}
		return db.audit(tx, site.WorkspaceID, actor, "funnel.delete", site.ID, funnelMeta(f))
	})
}

// goalInFunnels refuses deleting goal id of site while a saved funnel
// names it: the funnel would lose a step, and so its meaning.
func goalInFunnels(ctx context.Context, tx *writeTx, site string, id int64) error {
	rows, err := readFunnels(ctx, txQuerier{tx}, site, 0)
	if err != nil {
		return err
	}
	var names []string
	for _, r := range rows {
		for _, gid := range r.ids {
			if gid == id {
				names = append(names, fmt.Sprintf("%q", r.f.Name))
				break
			}
		}
	}
	if len(names) > 0 {
		return fault.Errorf(fault.GoalInFunnel, "this goal is a step of the saved funnel(s) %s: change or delete them first", strings.Join(names, ", "))
	}
	return nil
}
