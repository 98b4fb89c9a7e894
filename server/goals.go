package server

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// Goals of a site (docs/query-api.md#goals-and-funnels): created and deleted as
// the site's other settings are (the admin token or an admin key that
// reaches the site), listed by whoever reads the site's figures.

// createGoal stores a goal; 201 with it.
//
// POST /v1/sites/:siteId/goals
func (s *Server) createGoal(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	body, err := decodeObject(w, r, adminBodyLimit)
	if err != nil {
		return err
	}
	ng, err := newGoalOf(body)
	if err != nil {
		return err
	}
	g, err := s.db.CreateGoal(r.Context(), p.actor(), site, ng)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, goalOf(g))
	return nil
}

// newGoalOf reads a goal's body: name, one of event_name and page_path,
// an optional property {name, value} and an optional currency (a revenue
// goal's); storage checks the values.
func newGoalOf(body object) (storage.NewGoal, error) {
	var ng storage.NewGoal
	var err error
	if ng.Name, err = body.str("name", fault.InvalidGoal); err != nil {
		return ng, err
	}
	for _, f := range []struct {
		key string
		dst **string
	}{{"event_name", &ng.EventName}, {"page_path", &ng.PagePath}} {
		if !body.has(f.key) {
			continue
		}
		v, err := body.str(f.key, fault.InvalidGoal)
		if err != nil {
			return ng, fault.Errorf(fault.InvalidGoal, "%s must be a string", f.key)
		}
		*f.dst = &v
	}
	if raw, ok := body["property"]; ok && string(raw) != "null" {
		var prop object
		if json.Unmarshal(raw, &prop) != nil || prop == nil {
			return ng, fault.Errorf(fault.InvalidGoal, "property must be an object {\"name\": ..., \"value\": ...}")
		}
		name, err := prop.str("name", fault.InvalidGoal)
		if err != nil {
			return ng, fault.Errorf(fault.InvalidGoal, "property.name is required and must be a string")
		}
		value, err := prop.str("value", fault.InvalidGoal)
		if err != nil {
			return ng, fault.Errorf(fault.InvalidGoal, "property.value is required and must be a string")
		}
		ng.Property = &storage.GoalProperty{Name: name, Value: value}
	}
	if raw, ok := body["currency"]; ok && string(raw) != "null" {
		var code string
		if json.Unmarshal(raw, &code) != nil {
			return ng, fault.Errorf(fault.InvalidGoal, "currency must be a string: an ISO 4217 code such as \"USD\", or null for a goal without revenue")
		}
		ng.Currency = &code
	}
	return ng, nil
}

// updateGoal sets or removes a goal's currency (the one field that
// changes: a goal's definition is its figures' meaning); 200 with the
// goal, 404 when the site has no such goal.
//
// PATCH /v1/sites/:siteId/goals/:goalId
func (s *Server) updateGoal(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(ps.ByName("goalId"), 10, 64)
	if err != nil {
		return fault.Errorf(fault.NotFound, "no goal with that id on this site")
	}
	body, err := decodeObject(w, r, adminBodyLimit)
	if err != nil {
		return err
	}
	for _, k := range []string{"name", "event_name", "page_path", "property"} {
		if body.has(k) {
			return fault.Errorf(fault.InvalidGoal, "%s cannot change: a goal's definition is what its figures mean; delete the goal and create another (only currency changes)", k)
		}
	}
	raw, ok := body["currency"]
	if !ok {
		return fault.Errorf(fault.InvalidGoal, "currency is required: an ISO 4217 code such as \"USD\", or null for a goal without revenue")
	}
	var code *string
	if string(raw) != "null" {
		var c string
		if json.Unmarshal(raw, &c) != nil {
			return fault.Errorf(fault.InvalidGoal, "currency must be a string: an ISO 4217 code such as \"USD\", or null for a goal without revenue")
		}
		code = &c
	}
	g, err := s.db.SetGoalCurrency(r.Context(), p.actor(), site, id, code)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, goalOf(g))
	return nil
}

// listGoals answers {"goals": [...]}, by name.
//
// GET /v1/sites/:siteId/goals
func (s *Server) listGoals(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	_, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeQueryRead)
	if err != nil {
		return err
	}
	list, err := s.db.Goals(r.Context(), site.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, goalList{Goals: rowsOf(list, goalOf)})
	return nil
}

// deleteGoal deletes a goal; 204, and 404 when the site has no such goal.
//
// DELETE /v1/sites/:siteId/goals/:goalId
func (s *Server) deleteGoal(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(ps.ByName("goalId"), 10, 64)
	if err != nil {
		return fault.Errorf(fault.NotFound, "no goal with that id on this site")
	}
	if err := s.db.DeleteGoal(r.Context(), p.actor(), site, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
