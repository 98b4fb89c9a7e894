package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tally-analytics/tally/storage"
)

// Traffic alerts (docs/email.md#traffic-alerts), checked by the instance
// that schedules mail, every alertEvery:
//
//   - spike: the site's visitors of the last 30 minutes (the query API's
//     "30m") are spike_visitors or more; at most one mail per recipient per
//     UTC hour (the outbox's period is the hour);
//   - drop: yesterday's visitors (the site's time zone) are drop_percent
//     or more below those of the same weekday a week before, which had at
//     least dropMinBaseline visitors; checked once the day is over, at
//     most one mail per recipient per day.
const (
	alertEvery      = 5 * time.Minute
	dropMinBaseline = 10
)

// Outbox kinds of the alerts.
const (
	mailSpike = "spike"
	mailDrop  = "drop"
)

// checkAlertsDue runs checkAlerts when alertEvery has passed since the
// last check of this instance.
func (s *Server) checkAlertsDue(ctx context.Context) error {
	now := s.now()
	if last := s.alertsAt.Load(); last != 0 && now.Sub(time.Unix(0, last)) < alertEvery {
		return nil
	}
	s.alertsAt.Store(now.UnixNano())
	return s.checkAlerts(ctx)
}

// checkAlerts enqueues the alerts whose rule holds now.
func (s *Server) checkAlerts(ctx context.Context) error {
	sites, err := s.db.MailSites(ctx, storage.MailAlerts)
	if err != nil {
		return err
	}
	now := s.now()
	for _, id := range sites {
		site, ok := s.db.Site(id)
		if !ok {
			continue
		}
		a, found, err := s.db.TrafficAlertOf(ctx, id)
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		// One site's failure leaves the others' alerts to be checked.
		if a.SpikeVisitors != nil {
			if err := s.checkSpike(ctx, site, *a.SpikeVisitors, now); err != nil {
				s.log.Error("traffic alert", "site", id, "rule", mailSpike, "err", err.Error())
			}
		}
		if a.DropPercent != nil {
			if err := s.checkDrop(ctx, site, *a.DropPercent, now); err != nil {
				s.log.Error("traffic alert", "site", id, "rule", mailDrop, "err", err.Error())
			}
		}
	}
	return nil
}

func (s *Server) checkSpike(ctx context.Context, site *storage.Site, threshold int, now time.Time) error {
	a, err := s.reportQuery(ctx, site, now, map[string]any{"metrics": []string{"visitors"}, "date_range": "30m"})
	if err != nil {
		return err
	}
	visitors := firstMetric(a)
	if visitors < float64(threshold) {
		return nil
	}
	period := mailSpike + ":" + now.UTC().Format("2006-01-02T15")
	v := alertView{Site: site.Name, Headline: fmt.Sprintf("traffic spike, %s current visitors", formatFigure("visitors", visitors)),
		Detail: fmt.Sprintf("%s visitors in the last 30 minutes, at or above the alert's threshold of %d.", formatFigure("visitors", visitors), threshold)}
	return s.enqueueAlert(ctx, site, period, v)
}

func (s *Server) checkDrop(ctx context.Context, site *storage.Site, percent int, now time.Time) error {
	loc, err := storage.LoadTimeZone(site.TimeZone)
	if err != nil {
		return err
	}
	local := now.In(loc)
	yesterday := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, loc).AddDate(0, 0, -1)
	before := yesterday.AddDate(0, 0, -7)
	day := yesterday.Format(time.DateOnly)
	a, err := s.reportQuery(ctx, site, now, map[string]any{
		"metrics": []string{"visitors"}, "date_range": []string{day, day},
		"include": map[string]any{"comparisons": map[string]any{"mode": "custom",
			"date_range": []string{before.Format(time.DateOnly), before.Format(time.DateOnly)}}},
	})
	if err != nil {
		return err
	}
	cur, prev := firstMetric(a), 0.0
	if len(a.Results) > 0 && a.Results[0].Comparison != nil {
		prev = a.Results[0].Comparison.Metrics[0]
	}
	if prev < dropMinBaseline || (prev-cur)*100 < float64(percent)*prev {
		return nil
	}
	fell := (prev - cur) * 100 / prev
	v := alertView{Site: site.Name, Headline: fmt.Sprintf("traffic drop, %.0f%% fewer visitors", fell),
		Detail: fmt.Sprintf("%s visitors on %s against %s on %s, a drop of %.0f%%, at or past the alert's threshold of %d%%.",
			formatFigure("visitors", cur), day, formatFigure("visitors", prev), before.Format(time.DateOnly), fell, percent)}
	return s.enqueueAlert(ctx, site, mailDrop+":"+day, v)
}

// enqueueAlert enqueues one alert to each of site's alert recipients not
// sent it for period.
func (s *Server) enqueueAlert(ctx context.Context, site *storage.Site, period string, v alertView) error {
	subs, err := s.db.MailSubscriptions(ctx, site.ID, storage.MailAlerts)
	if err != nil {
		return err
	}
	v.Dashboard = s.publicBase() + "/v1/ui/"
	for _, sub := range subs {
		kind, _, _ := strings.Cut(period, ":")
		if queued, err := s.db.MailQueued(ctx, kind, site.ID, sub.Email, period); err != nil || queued {
			continue
		}
		subject := site.Name + ": " + v.Headline
		text := func(u string) string { w := v; w.Unsubscribe = u; return execText(alertText, w) }
		html := func(u string) string { w := v; w.Unsubscribe = u; return execHTML(alertHTML, w) }
		if err := s.enqueueSiteMail(ctx, sub, period, subject, text, html); err != nil {
			return err
		}
	}
	return nil
}

// firstMetric is the first metric of an answer's first row, 0 without one.
func firstMetric(a *storage.QueryAnswer) float64 {
	if len(a.Results) == 0 || len(a.Results[0].Metrics) == 0 {
		return 0
	}
	return a.Results[0].Metrics[0]
}
