package storage

import (
	"context"
	"database/sql"
	"errors"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/tally-analytics/tally/fault"
)

// Goals of a site (docs/query-api.md#goals-and-funnels): an event name,
// optionally with a custom property's value, or a page path pattern. The query
// API and funnels read a goal as a filter on events (GoalFilter), so every
// figure of a goal comes from the same reads as the rest of the API.

// MaxGoalsPerSite bounds a site's goals: each goal of an event:goal
// breakdown is one read, and a dashboard lists them all.
const MaxGoalsPerSite = 100

// Bounds of a goal's texts.
const (
	maxGoalName      = 120
	maxGoalEventName = 300
	maxGoalPagePath  = 200
	maxGoalPropName  = 300
	maxGoalPropValue = 1000
)

// Goal is one goal of a site. Exactly one of EventName and PagePath is
// set; PropName and PropValue are both set or both empty.
type Goal struct {
	ID        int64
	SiteID    string
	Name      string
	EventName string
	PagePath  string
	PropName  string
	PropValue string
	// Currency is the ISO 4217 code of a revenue goal (a custom event
	// goal only), "" for a goal without revenue (goal_currency.go).
	Currency  string
	CreatedAt string
}

// NewGoal is a goal to create, as the client sent it.
type NewGoal struct {
	Name      string
	EventName *string
	PagePath  *string
	// Property is nil without a property match.
	Property *GoalProperty
	// Currency is nil for a goal without revenue.
	Currency *string
}

// GoalProperty is a goal's custom property match.
type GoalProperty struct {
	Name, Value string
}

func goalText(s, field string, most int) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > most || !utf8.ValidString(s) {
		return "", fault.Errorf(fault.InvalidGoal, "%s must be a non-empty string of at most %d bytes", field, most)
	}
	return s, nil
}

// check validates g and returns the goal it makes.
func (g NewGoal) check() (Goal, error) {
	var out Goal
	var err error
	if out.Name, err = goalText(g.Name, "name", maxGoalName); err != nil {
		return out, err
	}
	switch {
	case (g.EventName == nil) == (g.PagePath == nil):
		return out, fault.Errorf(fault.InvalidGoal, "a goal has exactly one of event_name and page_path")
	case g.EventName != nil:
		if out.EventName, err = goalText(*g.EventName, "event_name", maxGoalEventName); err != nil {
			return out, err
		}
	default:
		if out.PagePath, err = goalText(*g.PagePath, "page_path", maxGoalPagePath); err != nil {
			return out, err
		}
		if !strings.HasPrefix(out.PagePath, "/") {
			return out, fault.Errorf(fault.InvalidGoal, "page_path must start with /, as a page's path does (a * matches within a segment, ** across segments)")
		}
		if err := CheckPattern(PagePattern(out.PagePath)); err != nil {
			return out, fault.Errorf(fault.InvalidGoal, "page_path is too long a pattern: %v", err)
		}
	}
	if p := g.Property; p != nil {
		if out.PropName, err = goalText(p.Name, "property.name", maxGoalPropName); err != nil {
			return out, err
		}
		// A value is compared as the query API shows it: not trimmed.
		if p.Value == "" || len(p.Value) > maxGoalPropValue || !utf8.ValidString(p.Value) {
			return out, fault.Errorf(fault.InvalidGoal, "property.value must be a non-empty string of at most %d bytes", maxGoalPropValue)
		}
		out.PropValue = p.Value
	}
	if g.Currency != nil {
		if out.EventName == "" {
			return out, fault.Errorf(fault.InvalidGoal, "currency is for a custom event goal (event_name) only: a revenue goal counts the amounts its events carry, and a pageview carries none")
		}
		if out.Currency, err = CheckCurrency(*g.Currency); err != nil {
			return out, err
		}
	}
	return out, nil
}

// PagePattern is the RE2 pattern of a goal's page path, as Plausible
// builds it: ** matches anything, * anything but a slash, the rest
// literally.
func PagePattern(path string) string {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(path); {
		switch {
		case strings.HasPrefix(path[i:], "**"):
			b.WriteString(".*")
			i += 2
		case path[i] == '*':
			b.WriteString("[^/]*")
			i++
		default:
			j := i
			for j < len(path) && path[j] != '*' {
				j++
			}
			b.WriteString(regexp.QuoteMeta(path[i:j]))
			i = j
		}
	}
	b.WriteString("$")
	return b.String()
}

// GoalFilter is g as a filter on events: its event name (a page path goal:
// a pageview whose page matches) and its property's value, both as the
// query API shows them.
func GoalFilter(g Goal) QueryFilter {
	var parts []QueryFilter
	if g.EventName != "" {
		parts = append(parts, QueryFilter{Op: "is", Dim: "event:name", Values: []string{g.EventName}})
	} else {
		parts = append(parts, QueryFilter{Op: "is", Dim: "event:name", Values: []string{"pageview"}})
		if strings.Contains(g.PagePath, "*") {
			parts = append(parts, QueryFilter{Op: "matches", Dim: "event:page", Values: []string{PagePattern(g.PagePath)}})
		} else {
			parts = append(parts, QueryFilter{Op: "is", Dim: "event:page", Values: []string{g.PagePath}})
		}
	}
	if g.PropName != "" {
		parts = append(parts, QueryFilter{Op: "is", Dim: PropPrefix + g.PropName, Values: []string{g.PropValue}})
	}
	return QueryFilter{Op: "and", Children: parts}
}

// CreateGoal stores a goal of site and audits it (goal.create).
func (db *DB) CreateGoal(ctx context.Context, actor Actor, site *Site, ng NewGoal) (*Goal, error) {
	g, err := ng.check()
	if err != nil {
		return nil, err
	}
	g.SiteID, g.CreatedAt = site.ID, FormatTime(db.now())
	err = db.writer.do(ctx, func(tx *writeTx) error {
		if err := db.checkSite(site); err != nil {
			return err
		}
		var n int
		var taken bool
		if err := tx.QueryRow(`SELECT COUNT(*), COALESCE(MAX(CASE WHEN name = ? THEN 1 ELSE 0 END), 0) FROM goals WHERE site_id = ?`, g.Name, site.ID).Scan(&n, &taken); err != nil {
			return err
		}
		if taken {
			return fault.Errorf(fault.GoalNameTaken, "this site already has a goal named %q; goal names are unique per site", g.Name)
		}
		if n >= MaxGoalsPerSite {
			return fault.Errorf(fault.GoalLimitReached, "a site may have at most %d goals; delete one first", MaxGoalsPerSite)
		}
		if err := tx.QueryRow(`INSERT INTO goals(site_id, name, event_name, page_path, prop_name, prop_value, currency, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`, site.ID, g.Name, nullText(g.EventName), nullText(g.PagePath),
			nullText(g.PropName), nullText(g.PropValue), nullText(g.Currency), g.CreatedAt).Scan(&g.ID); err != nil {
			return err
		}
		// The set changed: its partials are kept under another dim.
		if _, err := tx.Exec(dropGoalPartialsSQL, site.ID); err != nil {
			return err
		}
		return db.audit(tx, site.WorkspaceID, actor, "goal.create", site.ID, goalMeta(g))
	})
	if err != nil {
		return nil, err
	}
	return &g, nil
}

// goalMeta is a goal as its audit rows record it.
func goalMeta(g Goal) map[string]any {
	m := map[string]any{"goal_id": g.ID, "name": g.Name}
	if g.EventName != "" {
		m["event_name"] = g.EventName
	} else {
		m["page_path"] = g.PagePath
	}
	if g.PropName != "" {
		// The property's name only: a value may be personal.
		m["property_name"] = g.PropName
	}
	if g.Currency != "" {
		m["currency"] = g.Currency
	}
	return m
}

func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// goalsSQL lists a site's goals by name (Goals; the goal partials' set).
const goalsSQL = `SELECT id, site_id, name, COALESCE(event_name, ''), COALESCE(page_path, ''),
	COALESCE(prop_name, ''), COALESCE(prop_value, ''), COALESCE(currency, ''), created_at FROM goals WHERE site_id = ? ORDER BY name`

// Goals lists site's goals by name.
func (db *DB) Goals(ctx context.Context, site string) ([]Goal, error) {
	rows, err := db.read.QueryContext(ctx, goalsSQL, site)
	if err != nil {
		return nil, err
	}
	return scanGoals(rows)
}

// scanGoals reads goalsSQL's rows and closes them.
func scanGoals(rows *sql.Rows) ([]Goal, error) {
	defer rows.Close()
	list := []Goal{}
	for rows.Next() {
		var g Goal
		if err := rows.Scan(&g.ID, &g.SiteID, &g.Name, &g.EventName, &g.PagePath, &g.PropName, &g.PropValue, &g.Currency, &g.CreatedAt); err != nil {
			return nil, err
		}
		list = append(list, g)
	}
	return list, rows.Err()
}

// DeleteGoal deletes goal id of site and audits it (goal.delete); a goal
// of another site, or none, is not_found.
func (db *DB) DeleteGoal(ctx context.Context, actor Actor, site *Site, id int64) error {
	return db.writer.do(ctx, func(tx *writeTx) error {
		if err := db.checkSite(site); err != nil {
			return err
		}
		var g Goal
		err := tx.QueryRow(`SELECT id, name, COALESCE(event_name, ''), COALESCE(page_path, ''), COALESCE(prop_name, ''), COALESCE(currency, '')
			FROM goals WHERE id = ? AND site_id = ?`, id, site.ID).Scan(&g.ID, &g.Name, &g.EventName, &g.PagePath, &g.PropName, &g.Currency)
		if errors.Is(err, sql.ErrNoRows) {
			return fault.Errorf(fault.NotFound, "no goal with that id on this site")
		}
		if err != nil {
			return err
		}
		if err := goalInFunnels(ctx, tx, site.ID, id); err != nil {
			return err
		}
		if _, err := tx.Exec(`DELETE FROM goals WHERE id = ?`, id); err != nil {
			return err
		}
		if _, err := tx.Exec(dropGoalPartialsSQL, site.ID); err != nil {
			return err
		}
		return db.audit(tx, site.WorkspaceID, actor, "goal.delete", site.ID, goalMeta(g))
	})
}

// SetGoalCurrency sets (nil: removes) the currency of goal id of site and
// audits it (goal.update, with the currency before as
// previous_currency); a goal of another site, or none, is not_found. Only
// a custom event goal takes one (report_goal_currency.go). Revenue is
// read when a query runs, so the new currency applies to the goal's
// events before it too (docs/query-api.md#revenue).
func (db *DB) SetGoalCurrency(ctx context.Context, actor Actor, site *Site, id int64, code *string) (*Goal, error) {
	var g Goal
	err := db.writer.do(ctx, func(tx *writeTx) error {
		if err := db.checkSite(site); err != nil {
			return err
		}
		err := tx.QueryRow(`SELECT id, site_id, name, COALESCE(event_name, ''), COALESCE(page_path, ''), COALESCE(prop_name, ''),
			COALESCE(prop_value, ''), COALESCE(currency, ''), created_at FROM goals WHERE id = ? AND site_id = ?`, id, site.ID).Scan(
			&g.ID, &g.SiteID, &g.Name, &g.EventName, &g.PagePath, &g.PropName, &g.PropValue, &g.Currency, &g.CreatedAt)
		if errors.Is(err, sql.ErrNoRows) {
			return fault.Errorf(fault.NotFound, "no goal with that id on this site")
		}
		if err != nil {
			return err
		}
		before := g.Currency
		g.Currency = ""
		if code != nil {
			if g.EventName == "" {
				return fault.Errorf(fault.InvalidGoal, "currency is for a custom event goal (event_name) only: a revenue goal counts the amounts its events carry, and a pageview carries none")
			}
			if g.Currency, err = CheckCurrency(*code); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(`UPDATE goals SET currency = ? WHERE id = ?`, nullText(g.Currency), id); err != nil {
			return err
		}
		meta := goalMeta(g)
		meta["previous_currency"] = nullText(before)
		meta["currency"] = nullText(g.Currency)
		return db.audit(tx, site.WorkspaceID, actor, "goal.update", site.ID, meta)
	})
	if err != nil {
		return nil, err
	}
	return &g, nil
}
