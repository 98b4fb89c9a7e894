package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tally-analytics/tally/storage"
)

// Email reports (docs/email.md#reports): a site's weekly (the last full
// Monday to Sunday week) and monthly (the last full month) summary, in
// the site's time zone, made through the query API's own path
// (storage.DB.Query), so that its figures are the API's.

// reportMetrics are the report's top figures, in the query's order.
var reportMetrics = []string{"visitors", "visits", "pageviews", "bounce_rate", "visit_duration"}

// reportTopN is how many sources and pages the report lists.
const reportTopN = 5

// mailReport is one site's report of one period.
type mailReport struct {
	Site *storage.Site
	Kind string // storage.MailWeekly or storage.MailMonthly
	// From and To are the period's first and last days (YYYY-MM-DD, in
	// the site's time zone); PrevFrom and PrevTo the period compared with.
	From, To, PrevFrom, PrevTo string
	// Figures are reportMetrics' values with their change against the
	// previous period.
	Figures []reportFigure
	Sources []reportRow
	Pages   []reportRow
}

// reportFigure is one top figure.
type reportFigure struct {
	Metric string
	Value  float64
	// Change is the query API's change (a percentage; points for
	// bounce_rate), nil when it has none (nothing before).
	Change *float64
}

// reportRow is a source or page and its visitors.
type reportRow struct {
	Name     string
	Visitors float64
}

// reportPeriod is the last full period of kind that ended at or before
// now, in loc: its first and last days, the end (the next day's start),
// and the period before it.
func reportPeriod(kind string, now time.Time, loc *time.Location) (from, to, prevFrom, prevTo time.Time, end time.Time) {
	local := now.In(loc)
	day := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, loc)
	if kind == storage.MailMonthly {
		end = time.Date(local.Year(), local.Month(), 1, 0, 0, 0, 0, loc)
		from = end.AddDate(0, -1, 0)
		prevFrom = end.AddDate(0, -2, 0)
		return from, end.AddDate(0, 0, -1), prevFrom, from.AddDate(0, 0, -1), end
	}
	// Monday is the week's first day (ISO 8601).
	back := (int(day.Weekday()) + 6) % 7
	end = day.AddDate(0, 0, -back)
	from = end.AddDate(0, 0, -7)
	return from, end.AddDate(0, 0, -1), from.AddDate(0, 0, -7), from.AddDate(0, 0, -1), end
}

// reportPeriodKey is the outbox's period of a report: its days.
func reportPeriodKey(from, to time.Time) string {
	return from.Format(time.DateOnly) + "/" + to.Format(time.DateOnly)
}

// makeReport computes the report of site for its last full period of
// kind before now.
func (s *Server) makeReport(ctx context.Context, site *storage.Site, kind string, now time.Time) (*mailReport, error) {
	loc, err := storage.LoadTimeZone(site.TimeZone)
	if err != nil {
		return nil, err
	}
	from, to, prevFrom, prevTo, _ := reportPeriod(kind, now, loc)
	rep := &mailReport{Site: site, Kind: kind, From: from.Format(time.DateOnly), To: to.Format(time.DateOnly),
		PrevFrom: prevFrom.Format(time.DateOnly), PrevTo: prevTo.Format(time.DateOnly)}
	top, err := s.reportQuery(ctx, site, now, map[string]any{
		"metrics":    reportMetrics,
		"date_range": []string{rep.From, rep.To},
		"include":    map[string]any{"comparisons": map[string]any{"mode": "custom", "date_range": []string{rep.PrevFrom, rep.PrevTo}}},
	})
	if err != nil {
		return nil, err
	}
	for i, m := range reportMetrics {
		f := reportFigure{Metric: m}
		if len(top.Results) > 0 {
			r := top.Results[0]
			f.Value = r.Metrics[i]
			if r.Comparison != nil {
				f.Change = r.Comparison.Change[i]
			}
		}
		rep.Figures = append(rep.Figures, f)
	}
	for _, b := range []struct {
		dim string
		to  *[]reportRow
	}{{"visit:source", &rep.Sources}, {"event:page", &rep.Pages}} {
		a, err := s.reportQuery(ctx, site, now, map[string]any{
			"metrics": []string{"visitors"}, "dimensions": []string{b.dim}, "date_range": []string{rep.From, rep.To},
			"order_by": [][]string{{"visitors", "desc"}, {b.dim, "asc"}}, "pagination": map[string]int{"limit": reportTopN},
		})
		if err != nil {
			return nil, err
		}
		for _, r := range a.Results {
			*b.to = append(*b.to, reportRow{Name: r.Dims[0], Visitors: r.Metrics[0]})
		}
	}
	return rep, nil
}

// reportQuery runs one query of the query API for site.
func (s *Server) reportQuery(ctx context.Context, site *storage.Site, now time.Time, body map[string]any) (*storage.QueryAnswer, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := storage.DecodeQuery(raw)
	if err != nil {
		return nil, err
	}
	return s.db.Query(ctx, site, req, now)
}

// scheduleMail enqueues the reports and alerts due, on one instance at a
// time (the others skip the round): each recipient's report of the last
// full period, once (the outbox's key), on the first round after the
// period ends; the alerts whose rule holds.
func (s *Server) scheduleMail(ctx context.Context) error {
	if !s.cfg.Mail.on() {
		return nil
	}
	var errs []error
	_, err := s.db.Leader(ctx, "mail-schedule", func() error {
		for _, kind := range []string{storage.MailWeekly, storage.MailMonthly} {
			if err := s.scheduleReports(ctx, kind); err != nil {
				errs = append(errs, err)
			}
		}
		if err := s.checkAlertsDue(ctx); err != nil {
			errs = append(errs, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// scheduleReports enqueues kind's reports due. A recipient who subscribed
// after a period ended gets the next one: reports are not sent for
// periods that ended before the subscription, nor for older periods a
// server missed while down (only the last full one).
func (s *Server) scheduleReports(ctx context.Context, kind string) error {
	sites, err := s.db.MailSites(ctx, kind)
	if err != nil {
		return err
	}
	now := s.now()
	for _, id := range sites {
		site, ok := s.db.Site(id)
		if !ok {
			continue
		}
		loc, err := storage.LoadTimeZone(site.TimeZone)
		if err != nil {
			continue
		}
		from, to, _, _, end := reportPeriod(kind, now, loc)
		period := reportPeriodKey(from, to)
		subs, err := s.db.MailSubscriptions(ctx, id, kind)
		if err != nil {
			return err
		}
		var rep *mailReport
		for _, sub := range subs {
			created, err := time.Parse(time.RFC3339Nano, sub.CreatedAt)
			if err != nil || !created.Before(end) {
				continue
			}
			queued, err := s.db.MailQueued(ctx, kind, id, sub.Email, period)
			if err != nil || queued {
				continue
			}
			if rep == nil {
				if rep, err = s.makeReport(ctx, site, kind, now); err != nil {
					// One site's failure leaves the others' reports to go;
					// this one is tried again next round.
					s.log.Error("mail report", "site", id, "kind", kind, "err", err.Error())
					break
				}
			}
			text, html := rep.render(s)
			if err := s.enqueueSiteMail(ctx, sub, period, rep.subject(), text, html); err != nil {
				return err
			}
		}
	}
	return nil
}

// enqueueSiteMail renders and enqueues one mail of a site's subscription:
// its unsubscribe link, its key. text and html render the bodies given
// the link.
func (s *Server) enqueueSiteMail(ctx context.Context, sub storage.MailSubscription, period, subject string, text, html func(unsubscribe string) string) error {
	from, err := s.cfg.Mail.fromAddress()
	if err != nil {
		return fmt.Errorf("SMTP_FROM: %w", err)
	}
	token, err := s.db.UnsubscribeToken(ctx, sub.ID)
	if err != nil {
		return err
	}
	link := s.unsubscribeURL(token)
	kind := sub.Kind
	if kind == storage.MailAlerts {
		kind, _, _ = strings.Cut(period, ":")
	}
	key := kind + "\x00" + sub.SiteID + "\x00" + strings.ToLower(sub.Email) + "\x00" + period
	msg := &mailMessage{From: from, To: sub.Email, Subject: subject, Date: s.now(), Key: key, Unsubscribe: link,
		Text: text(link), HTML: html(link)}
	raw, err := msg.encode()
	if err != nil {
		return err
	}
	_, err = s.db.EnqueueMail(ctx, storage.OutboxMail{Kind: kind, SiteID: sub.SiteID, Recipient: sub.Email, Period: period, Message: raw})
	return err
}

// subject is the report's subject line.
func (r *mailReport) subject() string {
	return fmt.Sprintf("%s report for %s: %s – %s", titleKind(r.Kind), r.Site.Name, r.From, r.To)
}

func titleKind(kind string) string {
	if kind == storage.MailMonthly {
		return "Monthly"
	}
	return "Weekly"
}

// metricLabel is a report figure's name as the dashboard says it.
func metricLabel(m string) string {
	switch m {
	case "visitors":
		return "Unique visitors"
	case "visits":
		return "Total visits"
	case "pageviews":
		return "Total pageviews"
	case "bounce_rate":
		return "Bounce rate"
	}
	return "Visit duration"
}

// formatFigure writes a figure's value: a rate as a percentage, a
// duration in minutes and seconds, counts whole.
func formatFigure(metric string, v float64) string {
	switch metric {
	case "bounce_rate":
		return strconv.FormatFloat(v, 'f', -1, 64) + "%"
	case "visit_duration":
		sec := int(math.Round(v))
		if sec >= 60 {
			return fmt.Sprintf("%dm %02ds", sec/60, sec%60)
		}
		return fmt.Sprintf("%ds", sec)
	}
	return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
}

// formatChange writes a change: "+12%", "-3 pts" for bounce_rate, "–"
// with nothing to compare with.
func formatChange(metric string, c *float64) string {
	if c == nil {
		return "–"
	}
	unit := "%"
	if metric == "bounce_rate" {
		unit = " pts"
	}
	sign := ""
	if *c > 0 {
		sign = "+"
	}
	return sign + strconv.FormatFloat(*c, 'f', -1, 64) + unit
}
