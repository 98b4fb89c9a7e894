package server

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// The mail endpoints (docs/email.md): a site's report subscriptions and
// traffic alerts, set by its admins (the admin token, an admin key that
// reaches the site, a signed-in owner or admin); the unsubscribe page;
// password reset by email.
func (s *Server) mailRoutes(rt *router) {
	rt.handleV1(http.MethodGet, "/sites/:siteId/email-reports", s.listEmailReports)
	rt.handleV1(http.MethodPost, "/sites/:siteId/email-reports", s.setEmailReports)
	rt.handleV1(http.MethodDelete, "/sites/:siteId/email-reports", s.deleteEmailReports)
	rt.handleV1(http.MethodGet, "/sites/:siteId/traffic-alerts", s.getTrafficAlert)
	rt.handleV1(http.MethodPut, "/sites/:siteId/traffic-alerts", s.putTrafficAlert)
	rt.handleV1(http.MethodDelete, "/sites/:siteId/traffic-alerts", s.deleteTrafficAlert)
	rt.handleV1(http.MethodPost, "/auth/password/forgot", s.forgotPassword)
	rt.route(http.MethodGet, "/unsubscribe/:token", s.unsubscribePage)
	rt.route(http.MethodPost, "/unsubscribe/:token", s.unsubscribe)
}

// emailReportsOf is a site's report subscriptions by recipient.
func (s *Server) emailReportsOf(r *http.Request, site *storage.Site) (emailReportList, error) {
	subs, err := s.db.MailSubscriptions(r.Context(), site.ID, storage.MailWeekly, storage.MailMonthly)
	if err != nil {
		return emailReportList{}, err
	}
	out := emailReportList{Recipients: []emailReportBody{}, MailConfigured: s.cfg.Mail.on()}
	at := map[string]int{}
	for _, sub := range subs {
		key := strings.ToLower(sub.Email)
		i, ok := at[key]
		if !ok {
			i = len(out.Recipients)
			at[key] = i
			out.Recipients = append(out.Recipients, emailReportBody{Email: sub.Email, CreatedAt: sub.CreatedAt})
		}
		switch sub.Kind {
		case storage.MailWeekly:
			out.Recipients[i].Weekly = true
		case storage.MailMonthly:
			out.Recipients[i].Monthly = true
		}
	}
	return out, nil
}

// listEmailReports answers the site's report recipients.
//
// GET /v1/sites/:siteId/email-reports
func (s *Server) listEmailReports(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	_, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	list, err := s.emailReportsOf(r, site)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

// setEmailReports takes {email, weekly, monthly} (weekly and monthly
// booleans, at least one true) and makes the recipient's subscriptions
// so; 200 with the site's list.
//
// POST /v1/sites/:siteId/email-reports
func (s *Server) setEmailReports(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	body, err := decodeObject(w, r, adminBodyLimit)
	if err != nil {
		return err
	}
	email, err := body.str("email", fault.InvalidEmail)
	if err != nil {
		return err
	}
	var weekly, monthly bool
	for _, f := range []struct {
		key string
		to  *bool
	}{{"weekly", &weekly}, {"monthly", &monthly}} {
		if raw, ok := body[f.key]; ok && json.Unmarshal(raw, f.to) != nil {
			return fieldError(fault.InvalidBody, f.key, f.key+" must be true or false")
		}
	}
	if !weekly && !monthly {
		return fault.Errorf(fault.InvalidBody, "set weekly and/or monthly to true (DELETE removes a recipient)")
	}
	if err := s.db.SetEmailReports(r.Context(), p.actor(), site, email, weekly, monthly); err != nil {
		return err
	}
	list, err := s.emailReportsOf(r, site)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

// deleteEmailReports takes {email} and ends the recipient's reports of
// the site; 204, or 404 when it had none.
//
// DELETE /v1/sites/:siteId/email-reports
func (s *Server) deleteEmailReports(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	body, err := decodeObject(w, r, adminBodyLimit)
	if err != nil {
		return err
	}
	email, err := body.str("email", fault.InvalidEmail)
	if err != nil {
		return err
	}
	list, err := s.emailReportsOf(r, site)
	if err != nil {
		return err
	}
	found := false
	for _, rec := range list.Recipients {
		found = found || strings.EqualFold(rec.Email, strings.TrimSpace(email))
	}
	if !found {
		return fault.Errorf(fault.NotFound, "this site sends no report to this email")
	}
	if err := s.db.SetEmailReports(r.Context(), p.actor(), site, email, false, false); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// trafficAlertOf is a site's alert settings as answered.
func (s *Server) trafficAlertOf(r *http.Request, site *storage.Site) (trafficAlertBody, error) {
	a, _, err := s.db.TrafficAlertOf(r.Context(), site.ID)
	if err != nil {
		return trafficAlertBody{}, err
	}
	subs, err := s.db.MailSubscriptions(r.Context(), site.ID, storage.MailAlerts)
	if err != nil {
		return trafficAlertBody{}, err
	}
	out := trafficAlertBody{Recipients: []string{}, SpikeVisitors: a.SpikeVisitors, DropPercent: a.DropPercent, MailConfigured: s.cfg.Mail.on()}
	if a.UpdatedAt != "" {
		out.UpdatedAt = &a.UpdatedAt
	}
	for _, sub := range subs {
		out.Recipients = append(out.Recipients, sub.Email)
	}
	return out, nil
}

// getTrafficAlert answers the site's alert thresholds and recipients
// (nulls and none when unset).
//
// GET /v1/sites/:siteId/traffic-alerts
func (s *Server) getTrafficAlert(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	_, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	a, err := s.trafficAlertOf(r, site)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

// putTrafficAlert takes {recipients, spike_visitors?, drop_percent?} and
// replaces the site's alerts; 200 with them.
//
// PUT /v1/sites/:siteId/traffic-alerts
func (s *Server) putTrafficAlert(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	body, err := decodeObject(w, r, adminBodyLimit)
	if err != nil {
		return err
	}
	recipients, err := body.strings("recipients", fault.InvalidEmail)
	if err != nil {
		return err
	}
	a := storage.TrafficAlert{SiteID: site.ID}
	for _, f := range []struct {
		key string
		to  **int
	}{{"spike_visitors", &a.SpikeVisitors}, {"drop_percent", &a.DropPercent}} {
		raw, ok := body[f.key]
		if !ok || string(raw) == "null" {
			continue
		}
		var n int
		if json.Unmarshal(raw, &n) != nil {
			return fieldError(fault.InvalidAlert, f.key, f.key+" must be null or a whole number")
		}
		*f.to = &n
	}
	if a.SpikeVisitors == nil && a.DropPercent == nil {
		return fault.Errorf(fault.InvalidAlert, "set spike_visitors and/or drop_percent (DELETE turns the alerts off)")
	}
	if len(recipients) == 0 {
		return fieldError(fault.InvalidEmail, "recipients", "recipients must list at least one email address")
	}
	if err := s.db.SetTrafficAlert(r.Context(), p.actor(), site, a, recipients); err != nil {
		return err
	}
	out, err := s.trafficAlertOf(r, site)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// deleteTrafficAlert turns the site's alerts off; 204, or 404 when none
// were set.
//
// DELETE /v1/sites/:siteId/traffic-alerts
func (s *Server) deleteTrafficAlert(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, site, err := s.site(r, ps.ByName("siteId"), storage.ScopeAdmin)
	if err != nil {
		return err
	}
	found, err := s.db.DeleteTrafficAlert(r.Context(), p.actor(), site)
	if err != nil {
		return err
	}
	if !found {
		return fault.Errorf(fault.NotFound, "this site has no traffic alerts")
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
