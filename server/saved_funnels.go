package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// Saved funnels of a site (docs/query-api.md#saved-funnels): written as
// goals are (the admin token, an admin key that reaches the site, an
// admin's or owner's session), read by whoever reads the site's figures.
// The dashboard runs one with POST /v1/sites/:siteId/funnel and its steps'
// goal names (funnel.go).

// createFunnel stores a funnel; 201 with it.
//
// POST /v1/sites/:siteId/funnels
func (s *Server) createFunnel(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	c, err := funnelChangeOf(w, r)
	if err != nil {
		return err
	}
	f, err := s.db.CreateFunnel(r.Context(), p.actor(), site, c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, savedFunnelOf(f))
	return nil
}

// funnelChangeOf reads a funnel's body: name (a string) and steps (an
// array whose elements are goal ids, numbers, or goal names, strings),
// each optional here; storage checks the values and which are required.
func funnelChangeOf(w http.ResponseWriter, r *http.Request) (storage.FunnelChange, error) {
	var c storage.FunnelChange
	body, err := decodeObject(w, r, adminBodyLimit)
	if err != nil {
		return c, err
	}
	for k := range body {
		if k != "name" && k != "steps" {
			return c, fault.WithDetails(fault.InvalidFunnel, fmt.Sprintf("unknown field %q: a funnel has name and steps", k),
				[]fault.Detail{{Path: "/" + k, Message: "unknown field"}})
		}
	}
	if body.has("name") {
		name, err := body.str("name", fault.InvalidFunnel)
		if err != nil {
			return c, fault.WithDetails(fault.InvalidFunnel, "name must be a string", []fault.Detail{{Path: "/name", Message: "must be a string"}})
		}
		c.Name = &name
	}
	if raw, ok := body["steps"]; ok {
		var steps []json.RawMessage
		if json.Unmarshal(raw, &steps) != nil || steps == nil {
			return c, fault.WithDetails(fault.InvalidFunnel, "steps must be an array of goal ids or names",
				[]fault.Detail{{Path: "/steps", Message: "must be an array"}})
		}
		c.Steps = make([]storage.FunnelStepRef, len(steps))
		for i, st := range steps {
			var id int64
			var name string
			switch {
			case json.Unmarshal(st, &id) == nil:
				c.Steps[i].GoalID = &id
			case json.Unmarshal(st, &name) == nil:
				c.Steps[i].Name = &name
			default:
				msg := fmt.Sprintf("step %d must be a goal's id (a number) or name (a string)", i+1)
				return c, fault.WithDetails(fault.InvalidFunnel, msg, []fault.Detail{{Path: fmt.Sprintf("/steps/%d", i), Message: msg}})
			}
		}
	}
	return c, nil
}

// listFunnels answers {"funnels": [...]}, by name.
//
// GET /v1/sites/:siteId/funnels
func (s *Server) listFunnels(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	_, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeQueryRead)
	if err != nil {
		return err
	}
	list, err := s.db.Funnels(r.Context(), site.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, savedFunnelList{Funnels: rowsOf(list, savedFunnelOf)})
	return nil
}

// funnelID reads the path's funnel id; one that is not a number is the
// ordinary 404, as an unknown one is.
func funnelID(ps httprouter.Params) (int64, error) {
	id, err := strconv.ParseInt(ps.ByName("funnelId"), 10, 64)
	if err != nil {
		return 0, fault.Errorf(fault.NotFound, "no funnel with that id on this site")
	}
	return id, nil
}

// updateFunnel changes the fields the body has; 200 with the funnel.
//
// PATCH /v1/sites/:siteId/funnels/:funnelId
func (s *Server) updateFunnel(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	id, err := funnelID(ps)
	if err != nil {
		return err
	}
	c, err := funnelChangeOf(w, r)
	if err != nil {
		return err
	}
	f, err := s.db.UpdateFunnel(r.Context(), p.actor(), site, id, c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, savedFunnelOf(f))
	return nil
}

// deleteFunnel deletes a funnel; 204, and 404 when the site has no such
// funnel.
//
// DELETE /v1/sites/:siteId/funnels/:funnelId
func (s *Server) deleteFunnel(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	id, err := funnelID(ps)
	if err != nil {
		return err
	}
	if err := s.db.DeleteFunnel(r.Context(), p.actor(), site, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
