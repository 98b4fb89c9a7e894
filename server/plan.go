package server

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/schema"
)

// ReloadPlan re-reads the tracking plan file and, when it compiles, makes it
// the active plan for every later event. A broken file is refused with its
// error and the active plan stays. It is safe to call at any time (SIGHUP).
func (s *Server) ReloadPlan() (*schema.Plan, error) {
	if s.cfg.PlanPath == "" {
		return nil, fault.Errorf(fault.PlanNotConfigured, "no tracking plan is configured: start the server with SCHEMA_BUNDLE_PATH")
	}
	plan, err := schema.LoadPlan(s.cfg.PlanPath)
	if err != nil {
		s.log.Error("tracking plan reload refused; the active plan stays", "path", s.cfg.PlanPath, "err", err.Error())
		return nil, fault.Errorf(fault.InvalidPlan, "%v", err)
	}
	s.plan.Store(plan)
	s.log.Info("tracking plan reloaded", "path", s.cfg.PlanPath, "mode", plan.Mode, "events", len(plan.Events()))
	return plan, nil
}

// reloadPlan re-reads the plan file: 200 {mode, events} with the new plan,
// 400 invalid_plan (the old plan stays active), 409 without a plan file.
//
// POST /v1/plan/reload (admin token only)
func (s *Server) reloadPlan(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if _, err := s.requireAdminToken(r); err != nil {
		return err
	}
	plan, err := s.ReloadPlan()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, planBody{Events: plan.Events(), Mode: plan.Mode})
	return nil
}
