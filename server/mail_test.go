package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"net/mail"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/tally-analytics/tally/internal/dbtest"
	"github.com/tally-analytics/tally/storage"
)

// parsedMail is a received message read with net/mail and mime/multipart.
type parsedMail struct {
	header     mail.Header
	subject    string
	text, html string
}

func parseMail(t *testing.T, raw []byte) parsedMail {
	t.Helper()
	if bytes.Contains(bytes.ReplaceAll(raw, []byte("\r\n"), nil), []byte("\n")) {
		t.Errorf("the message has a bare LF: every line must end in CRLF")
	}
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("read the message: %v", err)
	}
	p := parsedMail{header: m.Header}
	if p.subject, err = new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject")); err != nil {
		t.Fatalf("decode Subject: %v", err)
	}
	mt, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		t.Fatalf("got Content-Type %q (%v), want multipart/alternative", m.Header.Get("Content-Type"), err)
	}
	mr := multipart.NewReader(m.Body, params["boundary"])
	var types []string
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read a part: %v", err)
		}
		ct, cp, _ := mime.ParseMediaType(part.Header.Get("Content-Type"))
		if cp["charset"] != "utf-8" {
			t.Errorf("got charset %q of %s, want utf-8", cp["charset"], ct)
		}
		// multipart.Reader decodes quoted-printable itself and drops the
		// header: read the raw part to check the encoding too.
		body, err := io.ReadAll(part)
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, ct)
		switch ct {
		case "text/plain":
			p.text = string(body)
		case "text/html":
			p.html = string(body)
		}
	}
	if strings.Join(types, ",") != "text/plain,text/html" {
		t.Errorf("got parts %v, want text/plain then text/html", types)
	}
	return p
}

// subscribeReports makes email a recipient of site's reports.
func subscribeReports(h *harness, site, email string, weekly, monthly bool) {
	h.t.Helper()
	r := h.q("POST", "/v1/sites/"+site+"/email-reports", testAdminToken, map[string]any{"email": email, "weekly": weekly, "monthly": monthly})
	mustStatus(h.t, r, 200, "")
}

// sendReportTraffic sends pageviews in the weeks of 19 and 26 January
// 2026 (the harness's clock is Saturday 31 January): 2 visitors the week
// before, 3 the week after, from two sources and on two pages.
func sendReportTraffic(h *harness, site string) {
	h.t.Helper()
	for i, e := range []struct {
		anon, url, ref string
		at             time.Time
	}{
		{"a", "https://example.test/", "", day(20, 10, 0)},
		{"b", "https://example.test/pricing", "https://www.google.com/", day(21, 10, 0)},
		{"c", "https://example.test/", "https://www.google.com/", day(27, 10, 0)},
		{"d", "https://example.test/pricing", "https://news.ycombinator.com/", day(28, 10, 0)},
		{"d", "https://example.test/docs", "", day(28, 10, 1)},
		{"e", "https://example.test/", "https://www.google.com/", day(30, 11, 0)},
	} {
		extra := map[string]any{"url": e.url}
		if e.ref != "" {
			extra["referrer"] = e.ref
		}
		h.sendAt(site, i+1, e.anon, "pageview", e.at, extra)
	}
}

// toMonday moves the clock to Monday 2 February 2026 10:00 UTC, after the
// week of 26 January ends.
func toMonday(h *harness) {
	h.clock.Advance(time.Date(2026, 2, 2, 10, 0, 0, 0, time.UTC).Sub(h.clock.Now()))
}

func TestWeeklyReportMailIsMIMEWithAWorkingUnsubscribeLink(t *testing.T) {
	t.Parallel()
	ts := newTestSMTP(t, SMTPStartTLS)
	h := newMailHarness(t, ts)
	h.setupTenant("acme", "web")
	sendReportTraffic(h, "web")
	subscribeReports(h, "web", "Ana@Example.com", true, false)
	ctx := context.Background()
	// Saturday: the last full week ended before the subscription, so none
	// is sent for it.
	if err := h.srv.scheduleMail(ctx); err != nil {
		t.Fatal(err)
	}
	if n := h.count(`SELECT COUNT(*) FROM mail_outbox`); n != 0 {
		t.Fatalf("got %d mails before the subscription's first full week ended, want 0", n)
	}
	// Sunday 23:59: the week of the 26th has not ended.
	h.clock.Advance(time.Date(2026, 2, 1, 23, 59, 0, 0, time.UTC).Sub(h.clock.Now()))
	h.srv.mailRound(ctx)
	if n := h.count(`SELECT COUNT(*) FROM mail_outbox`); n != 0 {
		t.Fatalf("got %d mails before the week ended, want 0", n)
	}
	toMonday(h)
	h.srv.mailRound(ctx)
	got := ts.mails()
	if len(got) != 1 {
		t.Fatalf("got %d mails, want 1", len(got))
	}
	if got[0].From != "reports@tally.example" || strings.Join(got[0].To, ",") != "Ana@Example.com" {
		t.Errorf("got envelope %q -> %v, want reports@tally.example -> Ana@Example.com", got[0].From, got[0].To)
	}
	m := parseMail(t, got[0].Data)
	for name, want := range map[string]string{
		"From":                  `"Tally Reports" <reports@tally.example>`,
		"To":                    "<Ana@Example.com>",
		"MIME-Version":          "1.0",
		"List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
	} {
		if g := m.header.Get(name); g != want {
			t.Errorf("got %s %q, want %q", name, g, want)
		}
	}
	if want := "Weekly report for web: 2026-01-26 – 2026-02-01"; m.subject != want {
		t.Errorf("got Subject %q, want %q", m.subject, want)
	}
	if raw := m.header.Get("Subject"); !strings.HasPrefix(raw, "=?utf-8?q?") {
		t.Errorf("got raw Subject %q, want RFC 2047 (it has an en dash)", raw)
	}
	if d, err := m.header.Date(); err != nil || !d.Equal(time.Date(2026, 2, 2, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("got Date %v (%v), want the clock's 2026-02-02 10:00 UTC", d, err)
	}
	key := "weekly\x00web\x00ana@example.com\x002026-01-26/2026-02-01"
	from, _ := mail.ParseAddress(testMailFrom)
	if g, want := m.header.Get("Message-ID"), messageID(key, from); g != want || !strings.HasSuffix(g, "@tally.example>") {
		t.Errorf("got Message-ID %q, want %q (from the report, period and recipient)", g, want)
	}
	for _, part := range []string{m.text, m.html} {
		for _, want := range []string{"Unique visitors", "Top sources", "Top pages", "/pricing", "Google"} {
			if !strings.Contains(part, want) {
				t.Errorf("a part lacks %q:\n%s", want, part)
			}
		}
	}
	lu := m.header.Get("List-Unsubscribe")
	link := strings.TrimSuffix(strings.TrimPrefix(lu, "<"), ">")
	if !strings.HasPrefix(link, h.query.URL+"/unsubscribe/") || !strings.Contains(m.text, link) || !strings.Contains(m.html, link) {
		t.Fatalf("got List-Unsubscribe %q, want this server's /unsubscribe/ link, also in both parts", lu)
	}

	// The link works without signing in: GET asks, a one-click POST
	// (RFC 8058) unsubscribes, and from then on the link is spent.
	page := h.request("GET", link, "", nil)
	if page.status != 200 || !strings.Contains(string(page.body), "<form method=\"post\">") || strings.Contains(string(page.body), "Ana@") {
		t.Fatalf("got %d %s, want 200 and a confirmation form naming no address", page.status, page.body)
	}
	if n := h.count(`SELECT COUNT(*) FROM mail_subscriptions`); n != 1 {
		t.Fatalf("got %d subscriptions after a GET, want 1 (a GET changes nothing)", n)
	}
	req, _ := http.NewRequest("POST", link, strings.NewReader("List-Unsubscribe=One-Click"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("got %d from the one-click POST, want 200", res.StatusCode)
	}
	if n := h.count(`SELECT COUNT(*) FROM mail_subscriptions`); n != 0 {
		t.Errorf("got %d subscriptions after unsubscribing, want 0", n)
	}
	if r := h.request("GET", link, "", nil); r.status != 404 {
		t.Errorf("got %d for a spent link, want 404", r.status)
	}
	if r := h.request("POST", link, "", nil); r.status != 200 {
		t.Errorf("got %d for a second POST, want 200 (unsubscribed either way)", r.status)
	}
	forged := link[:len(link)-2] + "AA"
	if r := h.request("POST", forged, "", nil); r.status != 404 || !strings.Contains(string(r.body), "not valid") {
		t.Errorf("got %d %s for a forged token, want the 404 page", r.status, r.body)
	}
	entries := h.q("GET", "/v1/workspaces/acme/audit", testAdminToken, nil)
	for _, want := range []string{"email_report.subscribe", "email_report.unsubscribe"} {
		if !strings.Contains(string(entries.body), want) {
			t.Errorf("the audit log lacks %s: %s", want, entries.body)
		}
	}
	if strings.Contains(strings.ToLower(string(entries.body)), "ana@example.com") {
		t.Errorf("the audit log holds the recipient's address: %s", entries.body)
	}
}

// The report's figures are the query API's own answers for the same
// period, in the site's time zone.
func TestReportFiguresAreTheQueryAPIs(t *testing.T) {
	t.Parallel()
	ts := newTestSMTP(t, SMTPStartTLS)
	h := newMailHarness(t, ts)
	h.setupTenant("acme", "web")
	mustStatus(t, h.q("PATCH", "/v1/sites/web", testAdminToken, map[string]any{"time_zone": "America/New_York"}), 200, "")
	sendReportTraffic(h, "web")
	toMonday(h)
	site, _ := h.db.Site("web")
	rep, err := h.srv.makeReport(context.Background(), site, storage.MailWeekly, h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if rep.From != "2026-01-26" || rep.To != "2026-02-01" || rep.PrevFrom != "2026-01-19" || rep.PrevTo != "2026-01-25" {
		t.Fatalf("got period %s..%s against %s..%s, want 2026-01-26..2026-02-01 against 2026-01-19..2026-01-25", rep.From, rep.To, rep.PrevFrom, rep.PrevTo)
	}
	top := h.q("POST", "/v1/sites/web/query", testAdminToken, map[string]any{
		"metrics": reportMetrics, "date_range": []string{rep.From, rep.To},
		"include": map[string]any{"comparisons": map[string]any{"mode": "custom", "date_range": []string{rep.PrevFrom, rep.PrevTo}}},
	})
	mustStatus(t, top, 200, "")
	var ans struct {
		Results []struct {
			Metrics    []float64 `json:"metrics"`
			Dimensions []string  `json:"dimensions"`
			Comparison struct {
				Change []*float64 `json:"change"`
			} `json:"comparison"`
		} `json:"results"`
	}
	decodeInto(t, top.body, &ans)
	for i, f := range rep.Figures {
		if f.Value != ans.Results[0].Metrics[i] {
			t.Errorf("got %s %v, want the API's %v", f.Metric, f.Value, ans.Results[0].Metrics[i])
		}
		if fmt.Sprint(deref(f.Change)) != fmt.Sprint(deref(ans.Results[0].Comparison.Change[i])) {
			t.Errorf("got %s change %v, want the API's %v", f.Metric, deref(f.Change), deref(ans.Results[0].Comparison.Change[i]))
		}
	}
	if rep.Figures[0].Value != 3 {
		t.Errorf("got %v visitors, want 3", rep.Figures[0].Value)
	}
	for _, b := range []struct {
		dim  string
		rows []reportRow
	}{{"visit:source", rep.Sources}, {"event:page", rep.Pages}} {
		r := h.q("POST", "/v1/sites/web/query", testAdminToken, map[string]any{
			"metrics": []string{"visitors"}, "dimensions": []string{b.dim}, "date_range": []string{rep.From, rep.To},
			"order_by": [][]string{{"visitors", "desc"}, {b.dim, "asc"}}, "pagination": map[string]int{"limit": 5},
		})
		mustStatus(t, r, 200, "")
		decodeInto(t, r.body, &ans)
		if len(ans.Results) != len(b.rows) || len(b.rows) == 0 {
			t.Fatalf("got %d %s rows, want the API's %d (and some)", len(b.rows), b.dim, len(ans.Results))
		}
		for i, row := range b.rows {
			if row.Name != ans.Results[i].Dimensions[0] || row.Visitors != ans.Results[i].Metrics[0] {
				t.Errorf("got %s row %d %q %v, want the API's %q %v", b.dim, i, row.Name, row.Visitors, ans.Results[i].Dimensions[0], ans.Results[i].Metrics[0])
			}
		}
	}
	// The text shows the same figures.
	text, _ := rep.render(h.srv)
	body := text("https://x.test/unsubscribe/t")
	if !strings.Contains(body, "Unique visitors: 3 (+50%)") {
		t.Errorf("the text lacks the visitors and their change:\n%s", body)
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestReportPeriods(t *testing.T) {
	t.Parallel()
	ny, _ := time.LoadLocation("America/New_York")
	tests := []struct {
		kind string
		now  time.Time
		loc  *time.Location
		want string // from/to, prevFrom/prevTo
	}{
		{storage.MailWeekly, time.Date(2026, 2, 2, 10, 0, 0, 0, time.UTC), time.UTC, "2026-01-26/2026-02-01 2026-01-19/2026-01-25"},
		{storage.MailWeekly, time.Date(2026, 2, 1, 23, 59, 0, 0, time.UTC), time.UTC, "2026-01-19/2026-01-25 2026-01-12/2026-01-18"},
		// Monday 03:00 UTC is still Sunday in New York.
		{storage.MailWeekly, time.Date(2026, 2, 2, 3, 0, 0, 0, time.UTC), ny, "2026-01-19/2026-01-25 2026-01-12/2026-01-18"},
		{storage.MailMonthly, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.UTC, "2026-02-01/2026-02-28 2026-01-01/2026-01-31"},
		{storage.MailMonthly, time.Date(2026, 1, 15, 0, 0, 0, 0, time.UTC), time.UTC, "2025-12-01/2025-12-31 2025-11-01/2025-11-30"},
	}
	for _, tt := range tests {
		from, to, pf, pt, _ := reportPeriod(tt.kind, tt.now, tt.loc)
		if got := reportPeriodKey(from, to) + " " + reportPeriodKey(pf, pt); got != tt.want {
			t.Errorf("%s at %v in %v: got %s, want %s", tt.kind, tt.now, tt.loc, got, tt.want)
		}
	}
}

func TestMailOverImplicitTLSAndPlain(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{SMTPImplicit, SMTPNone} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ts := newTestSMTP(t, mode)
			h := newMailHarness(t, ts)
			h.setupTenant("acme", "web")
			subscribeReports(h, "web", "ana@example.com", true, true)
			toMonday(h)
			h.srv.mailRound(context.Background())
			if got := ts.mails(); len(got) != 2 {
				t.Fatalf("got %d mails, want 2 (the weekly and the monthly report)", len(got))
			}
		})
	}
}

// STARTTLS is required by SMTP_TLS=starttls: a server that does not offer
// it gets no AUTH and no mail.
func TestStartTLSIsRequired(t *testing.T) {
	t.Parallel()
	ts := newTestSMTP(t, SMTPNone) // offers no STARTTLS
	mc := ts.config()
	mc.TLS = SMTPStartTLS
	err := sendMail(context.Background(), mc, "a@tally.example", "b@example.com", []byte("Subject: x\r\n\r\nx\r\n"))
	if err == nil || !strings.Contains(err.Error(), "STARTTLS") {
		t.Fatalf("got %v, want a refusal naming STARTTLS", err)
	}
	if n := ts.dataCount(); n != 0 {
		t.Errorf("got %d messages sent, want 0", n)
	}
}

func TestMailIsRetriedWithBackoff(t *testing.T) {
	t.Parallel()
	ts := newTestSMTP(t, SMTPStartTLS)
	// The first attempt gets a 451, the second a dropped connection, the
	// third goes through.
	ts.setFault(func(n int) error {
		switch n {
		case 1:
			return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"}
		case 2:
			return errDropConnection
		}
		return nil
	})
	h := newMailHarness(t, ts)
	h.setupTenant("acme", "web")
	subscribeReports(h, "web", "ana@example.com", true, false)
	toMonday(h)
	ctx := context.Background()
	row := func() storage.OutboxRow {
		t.Helper()
		rows, err := h.db.MailOutbox(ctx, "web")
		if err != nil || len(rows) != 1 {
			t.Fatalf("got %d rows (%v), want 1", len(rows), err)
		}
		return rows[0]
	}
	h.srv.mailRound(ctx)
	r := row()
	start := h.clock.Now()
	if r.Status != storage.MailPending || r.Attempts != 1 || r.NextAttemptAt != storage.FormatTime(start.Add(time.Minute)) || !strings.Contains(r.LastError.String, "451") {
		t.Fatalf("after a 451 got %+v, want pending, 1 attempt, due in a minute", r)
	}
	h.srv.mailRound(ctx)
	if n := ts.dataCount(); n != 1 {
		t.Fatalf("got %d attempts before the backoff passed, want 1", n)
	}
	h.clock.Advance(time.Minute)
	h.srv.mailRound(ctx)
	r = row()
	if r.Attempts != 2 || r.NextAttemptAt != storage.FormatTime(start.Add(3*time.Minute)) {
		t.Fatalf("after a dropped connection got %+v, want 2 attempts, due 2 minutes later", r)
	}
	h.clock.Advance(2 * time.Minute)
	h.srv.mailRound(ctx)
	if r = row(); r.Status != storage.MailSent || r.Attempts != 3 {
		t.Fatalf("got %+v, want sent after 3 attempts", r)
	}
	if got := ts.mails(); len(got) != 1 {
		t.Fatalf("got %d mails delivered, want 1", len(got))
	}
	if n := h.count(`SELECT COUNT(*) FROM mail_outbox WHERE message <> ''`); n != 0 {
		t.Errorf("a sent mail keeps its message")
	}
}

func TestMailBackoffDoublesToItsCap(t *testing.T) {
	t.Parallel()
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute}
	for i, w := range want {
		if got := mailBackoff(i + 1); got != w {
			t.Errorf("attempt %d: got %v, want %v", i+1, got, w)
		}
	}
	if got := mailBackoff(30); got != mailMaxRetry {
		t.Errorf("got %v, want the cap %v", got, mailMaxRetry)
	}
}

// A mail failing mailMaxAttempts times is given up.
func TestMailIsGivenUp(t *testing.T) {
	t.Parallel()
	ts := newTestSMTP(t, SMTPStartTLS)
	ts.setFault(func(int) error {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
	})
	h := newMailHarness(t, ts)
	h.setupTenant("acme", "web")
	subscribeReports(h, "web", "ana@example.com", true, false)
	toMonday(h)
	for range mailMaxAttempts {
		h.srv.mailRound(context.Background())
		h.clock.Advance(mailMaxRetry)
	}
	rows, _ := h.db.MailOutbox(context.Background(), "web")
	if len(rows) != 1 || rows[0].Status != storage.MailFailed || rows[0].Attempts != mailMaxAttempts {
		t.Fatalf("got %+v, want one failed row after %d attempts", rows, mailMaxAttempts)
	}
	if n := ts.dataCount(); n != mailMaxAttempts {
		t.Errorf("got %d attempts, want %d", n, mailMaxAttempts)
	}
}

// A mail enqueued by a server that stopped before sending it is sent by
// the next one on the same database.
func TestMailSurvivesARestart(t *testing.T) {
	t.Parallel()
	ts := newTestSMTP(t, SMTPStartTLS)
	a := newMailHarness(t, ts)
	a.setupTenant("acme", "web")
	subscribeReports(a, "web", "ana@example.com", true, false)
	toMonday(a)
	if err := a.srv.scheduleMail(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.stop()
	b := newHarnessAt(t, a.path, withMail(ts))
	b.srv.cfg.PublicURL = b.query.URL
	b.clock.Advance(a.clock.Now().Sub(b.clock.Now()))
	if n, err := b.srv.deliverMail(context.Background()); err != nil || n != 1 {
		t.Fatalf("got %d sent (%v) after the restart, want 1", n, err)
	}
	if got := ts.mails(); len(got) != 1 {
		t.Fatalf("got %d mails, want 1", len(got))
	}
}

// Scheduled twice, by one server or two on one database, a report is one
// mail per recipient, delivered once.
func TestReportIsSentOncePerPeriodAndRecipient(t *testing.T) {
	t.Parallel()
	ts := newTestSMTP(t, SMTPStartTLS)
	a := newMailHarness(t, ts)
	a.setupTenant("acme", "web")
	subscribeReports(a, "web", "ana@example.com", true, false)
	subscribeReports(a, "web", "bo@example.com", true, false)
	toMonday(a)
	servers := []*harness{a}
	if dbtest.Postgres() {
		b := newHarnessAt(t, a.path, withMail(ts))
		b.srv.cfg.PublicURL = a.query.URL
		b.clock.Advance(a.clock.Now().Sub(b.clock.Now()))
		servers = append(servers, b)
	}
	var wg sync.WaitGroup
	for _, h := range servers {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h.srv.mailRound(context.Background())
			}()
		}
	}
	wg.Wait()
	for _, h := range servers {
		h.srv.mailRound(context.Background())
	}
	got := ts.mails()
	if len(got) != 2 {
		t.Fatalf("got %d mails from %d servers, want 2 (one per recipient)", len(got), len(servers))
	}
	if got[0].To[0] == got[1].To[0] {
		t.Errorf("got two mails to %v, want one to each recipient", got[0].To)
	}
	if n := a.count(`SELECT COUNT(*) FROM mail_outbox`); n != 2 {
		t.Errorf("got %d outbox rows, want 2", n)
	}
}

func TestEmailReportsAPI(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	h.setupTenant("other", "foreign")
	tests := []struct {
		name, method, token string
		body                any
		status              int
		code                string
	}{
		{"no email", "POST", testAdminToken, map[string]any{"weekly": true}, 400, "invalid_email"},
		{"bad email", "POST", testAdminToken, map[string]any{"email": "nope", "weekly": true}, 400, "invalid_email"},
		{"neither", "POST", testAdminToken, map[string]any{"email": "a@example.com"}, 400, "invalid_body"},
		{"not a boolean", "POST", testAdminToken, map[string]any{"email": "a@example.com", "weekly": "yes"}, 400, "invalid_body"},
		{"a reader", "POST", tn.readKey, map[string]any{"email": "a@example.com", "weekly": true}, 403, "forbidden"},
		{"a reader lists", "GET", tn.readKey, nil, 403, "forbidden"},
		{"subscribe", "POST", tn.adminKey, map[string]any{"email": "a@example.com", "weekly": true}, 200, ""},
		{"both", "POST", tn.adminKey, map[string]any{"email": "B@example.com", "weekly": true, "monthly": true}, 200, ""},
		{"monthly only", "POST", tn.adminKey, map[string]any{"email": "b@EXAMPLE.com", "monthly": true}, 200, ""},
		{"delete unknown", "DELETE", tn.adminKey, map[string]any{"email": "z@example.com"}, 404, "not_found"},
		{"delete", "DELETE", tn.adminKey, map[string]any{"email": "A@example.com"}, 204, ""},
	}
	for _, tt := range tests {
		r := h.q(tt.method, "/v1/sites/web/email-reports", tt.token, tt.body)
		if r.status != tt.status || r.code() != tt.code {
			t.Errorf("%s: got %d %q, want %d %q; %s", tt.name, r.status, r.code(), tt.status, tt.code, r.body)
		}
	}
	r := h.q("GET", "/v1/sites/web/email-reports", tn.adminKey, nil)
	mustStatus(t, r, 200, "")
	var list emailReportList
	decodeInto(t, r.body, &list)
	if len(list.Recipients) != 1 || list.Recipients[0].Email != "B@example.com" || list.Recipients[0].Weekly || !list.Recipients[0].Monthly || list.MailConfigured {
		t.Errorf("got %+v, want B@example.com monthly only, mail not configured", list)
	}
	// A site of another workspace is the ordinary 404.
	mustStatus(t, h.q("GET", "/v1/sites/foreign/email-reports", tn.adminKey, nil), 404, "not_found")
	// A signed-in viewer may not; an admin may.
	h.addUser("viewer@example.com", "viewer", "acme")
	h.addUser("admin@example.com", "admin", "acme")
	v := h.client()
	v.signin("viewer@example.com", testPassword)
	mustStatus(t, v.do("POST", "/v1/sites/web/email-reports", map[string]any{"email": "c@example.com", "weekly": true}), 403, "forbidden")
	ad := h.client()
	ad.signin("admin@example.com", testPassword)
	mustStatus(t, ad.do("POST", "/v1/sites/web/email-reports", map[string]any{"email": "c@example.com", "weekly": true}), 200, "")
}

func TestTrafficAlertsAPI(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.setupTenant("acme", "web")
	path := "/v1/sites/web/traffic-alerts"
	r := h.q("GET", path, tn.adminKey, nil)
	mustStatus(t, r, 200, "")
	if strings.TrimSpace(string(r.body)) != `{"recipients":[],"spike_visitors":null,"drop_percent":null,"updated_at":null,"mail_configured":false}` {
		t.Errorf("got %s, want the empty alerts", r.body)
	}
	for _, tt := range []struct {
		body any
		code string
	}{
		{map[string]any{"recipients": []string{"a@example.com"}}, "invalid_alert"},
		{map[string]any{"recipients": []string{"a@example.com"}, "spike_visitors": 0}, "invalid_alert"},
		{map[string]any{"recipients": []string{"a@example.com"}, "drop_percent": 101}, "invalid_alert"},
		{map[string]any{"recipients": []string{"a@example.com"}, "drop_percent": "50"}, "invalid_alert"},
		{map[string]any{"recipients": []string{}, "spike_visitors": 5}, "invalid_email"},
		{map[string]any{"recipients": []string{"nope"}, "spike_visitors": 5}, "invalid_email"},
	} {
		mustStatus(t, h.q("PUT", path, tn.adminKey, tt.body), 400, tt.code)
	}
	mustStatus(t, h.q("PUT", path, tn.readKey, map[string]any{"recipients": []string{"a@example.com"}, "spike_visitors": 5}), 403, "forbidden")
	r = h.q("PUT", path, tn.adminKey, map[string]any{"recipients": []string{"a@example.com", "A@example.com", "b@example.com"}, "spike_visitors": 5, "drop_percent": 50})
	mustStatus(t, r, 200, "")
	var a trafficAlertBody
	decodeInto(t, r.body, &a)
	if strings.Join(a.Recipients, ",") != "a@example.com,b@example.com" || *a.SpikeVisitors != 5 || *a.DropPercent != 50 {
		t.Errorf("got %+v, want two recipients, 5 and 50", a)
	}
	mustStatus(t, h.q("DELETE", path, tn.adminKey, nil), 204, "")
	mustStatus(t, h.q("DELETE", path, tn.adminKey, nil), 404, "not_found")
	if n := h.count(`SELECT COUNT(*) FROM mail_subscriptions`); n != 0 {
		t.Errorf("got %d subscriptions after the alerts' delete, want 0", n)
	}
	audit := string(h.q("GET", "/v1/workspaces/acme/audit", testAdminToken, nil).body)
	if !strings.Contains(audit, "traffic_alert.update") || !strings.Contains(audit, "traffic_alert.delete") || strings.Contains(audit, "b@example.com") {
		t.Errorf("got audit %s, want traffic_alert.update and .delete without addresses", audit)
	}
}

func TestSpikeAlertAtMostOncePerHour(t *testing.T) {
	t.Parallel()
	ts := newTestSMTP(t, SMTPStartTLS)
	h := newMailHarness(t, ts)
	tn := h.setupTenant("acme", "web")
	mustStatus(t, h.q("PUT", "/v1/sites/web/traffic-alerts", tn.adminKey, map[string]any{"recipients": []string{"ops@example.com"}, "spike_visitors": 2}), 200, "")
	ctx := context.Background()
	now := h.clock.Now()
	h.sendAt("web", 1, "a", "pageview", now.Add(-10*time.Minute), nil)
	if err := h.srv.checkAlerts(ctx); err != nil {
		t.Fatal(err)
	}
	if n := h.count(`SELECT COUNT(*) FROM mail_outbox`); n != 0 {
		t.Fatalf("got %d alerts with 1 visitor under a threshold of 2, want 0", n)
	}
	h.sendAt("web", 2, "b", "pageview", now.Add(-5*time.Minute), nil)
	for range 2 {
		if err := h.srv.checkAlerts(ctx); err != nil {
			t.Fatal(err)
		}
	}
	h.clock.Advance(20 * time.Minute) // 09:25, the same hour
	h.sendAt("web", 3, "c", "pageview", h.clock.Now().Add(-time.Minute), nil)
	if err := h.srv.checkAlerts(ctx); err != nil {
		t.Fatal(err)
	}
	if n := h.count(`SELECT COUNT(*) FROM mail_outbox WHERE kind = 'spike'`); n != 1 {
		t.Fatalf("got %d spike alerts in one hour, want 1", n)
	}
	h.clock.Advance(40 * time.Minute) // 10:05, the next hour
	h.sendAt("web", 4, "d", "pageview", h.clock.Now().Add(-2*time.Minute), nil)
	h.sendAt("web", 5, "e", "pageview", h.clock.Now().Add(-time.Minute), nil)
	if err := h.srv.checkAlerts(ctx); err != nil {
		t.Fatal(err)
	}
	if n := h.count(`SELECT COUNT(*) FROM mail_outbox WHERE kind = 'spike'`); n != 2 {
		t.Fatalf("got %d spike alerts over two hours, want 2", n)
	}
	if _, err := h.srv.deliverMail(ctx); err != nil {
		t.Fatal(err)
	}
	got := ts.mails()
	if len(got) != 2 {
		t.Fatalf("got %d mails, want 2", len(got))
	}
	m := parseMail(t, got[0].Data)
	if !strings.Contains(m.subject, "traffic spike") || m.header.Get("List-Unsubscribe") == "" {
		t.Fatalf("got subject %q and List-Unsubscribe %q, want a spike alert with an unsubscribe link", m.subject, m.header.Get("List-Unsubscribe"))
	}
	// Its link ends that recipient's alerts, and nothing else.
	subscribeReports(h, "web", "ops@example.com", true, false)
	link := strings.Trim(m.header.Get("List-Unsubscribe"), "<>")
	if r := h.request("POST", link, "", "List-Unsubscribe=One-Click"); r.status != 200 {
		t.Fatalf("got %d from the one-click POST, want 200", r.status)
	}
	if n := h.count(`SELECT COUNT(*) FROM mail_subscriptions WHERE kind = 'alerts'`); n != 0 {
		t.Errorf("got %d alert recipients after unsubscribing, want 0", n)
	}
	if n := h.count(`SELECT COUNT(*) FROM mail_subscriptions WHERE kind = 'weekly'`); n != 1 {
		t.Errorf("got %d report subscriptions, want 1: the alert's link ends the alerts only", n)
	}
	if audit := string(h.q("GET", "/v1/workspaces/acme/audit", testAdminToken, nil).body); !strings.Contains(audit, "traffic_alert.unsubscribe") {
		t.Errorf("the audit log lacks traffic_alert.unsubscribe: %s", audit)
	}
}

func TestDropAlert(t *testing.T) {
	t.Parallel()
	ts := newTestSMTP(t, SMTPStartTLS)
	h := newMailHarness(t, ts)
	tn := h.setupTenant("acme", "web")
	mustStatus(t, h.q("PUT", "/v1/sites/web/traffic-alerts", tn.adminKey, map[string]any{"recipients": []string{"ops@example.com"}, "drop_percent": 50}), 200, "")
	// Friday 23 January: 10 visitors; Friday 30 January (yesterday): 5.
	n := 0
	for i := range 10 {
		n++
		h.sendAt("web", n, fmt.Sprintf("before-%d", i), "pageview", day(23, 10, i), nil)
	}
	for i := range 6 {
		n++
		h.sendAt("web", n, fmt.Sprintf("after-%d", i), "pageview", day(30, 10, i), nil)
	}
	ctx := context.Background()
	if err := h.srv.checkAlerts(ctx); err != nil {
		t.Fatal(err)
	}
	if c := h.count(`SELECT COUNT(*) FROM mail_outbox`); c != 0 {
		t.Fatalf("got %d alerts for a drop of 40%%, want 0 (threshold 50%%)", c)
	}
	mustStatus(t, h.q("PUT", "/v1/sites/web/traffic-alerts", tn.adminKey, map[string]any{"recipients": []string{"ops@example.com"}, "drop_percent": 40}), 200, "")
	for range 2 {
		if err := h.srv.checkAlerts(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rows, _ := h.db.MailOutbox(ctx, "web")
	if len(rows) != 1 || rows[0].Kind != "drop" || rows[0].Period != "drop:2026-01-30" {
		t.Fatalf("got %+v, want one drop alert of 2026-01-30", rows)
	}
}

var resetLink = regexp.MustCompile(`/v1/ui/#password=([A-Za-z0-9_-]+)`)

func TestForgotPasswordMailsAResetLink(t *testing.T) {
	t.Parallel()
	ts := newTestSMTP(t, SMTPStartTLS)
	h := newMailHarness(t, ts)
	h.setupTenant("acme", "web")
	h.addUser("ana@example.com", "owner", "acme")
	known := h.q("POST", "/v1/auth/password/forgot", "", map[string]any{"email": "ANA@example.com"})
	unknown := h.q("POST", "/v1/auth/password/forgot", "", map[string]any{"email": "nobody@example.com"})
	mustStatus(t, known, 202, "")
	if unknown.status != known.status || !bytes.Equal(unknown.body, known.body) {
		t.Errorf("got %d %s for an unknown email, want the known one's %d %s", unknown.status, unknown.body, known.status, known.body)
	}
	var got []receivedMail
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		// The mail is made after the answer: poll for it.
		h.srv.deliverMail(context.Background())
		if got = ts.mails(); len(got) > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(got) != 1 || got[0].To[0] != "ana@example.com" {
		t.Fatalf("got %d mails, want 1 to ana@example.com", len(got))
	}
	m := parseMail(t, got[0].Data)
	if m.header.Get("List-Unsubscribe") != "" {
		t.Errorf("a password mail has List-Unsubscribe")
	}
	match := resetLink.FindStringSubmatch(m.text)
	if match == nil || !strings.Contains(m.html, match[0]) {
		t.Fatalf("no reset link in both parts:\n%s", m.text)
	}
	mustStatus(t, h.q("POST", "/v1/auth/password-reset", "", map[string]any{"token": match[1], "password": "a brand new password"}), 204, "")
	mustStatus(t, h.q("POST", "/v1/auth/password-reset", "", map[string]any{"token": match[1], "password": "another new password"}), 400, "invalid_token")
	b := h.client()
	b.signin("ana@example.com", "a brand new password")

	// Throttled per account as sign-in is: the sixth in the window is 429.
	for i := range 4 {
		mustStatus(t, h.q("POST", "/v1/auth/password/forgot", "", map[string]any{"email": "ana@example.com"}), 202, "")
		_ = i
	}
	mustStatus(t, h.q("POST", "/v1/auth/password/forgot", "", map[string]any{"email": "ana@example.com"}), 429, "rate_limited")
	mustStatus(t, h.q("POST", "/v1/auth/password/forgot", "", map[string]any{"email": 5}), 400, "invalid_email")
	// Per client too: 20 in the window, whatever the emails.
	for i := range 14 {
		mustStatus(t, h.q("POST", "/v1/auth/password/forgot", "", map[string]any{"email": fmt.Sprintf("u%d@example.com", i)}), 202, "")
	}
	mustStatus(t, h.q("POST", "/v1/auth/password/forgot", "", map[string]any{"email": "u99@example.com"}), 429, "rate_limited")
	// A page of another origin cannot send one.
	mustStatus(t, h.q("POST", "/v1/auth/password/forgot", "", map[string]any{"email": "ana@example.com"}, "Origin", "https://evil.example"), 403, "forbidden")
}

func TestForgotPasswordWithoutSMTP(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	mustStatus(t, h.q("POST", "/v1/auth/password/forgot", "", map[string]any{"email": "ana@example.com"}), 503, "mail_not_configured")
}

func TestInvitationIsMailed(t *testing.T) {
	t.Parallel()
	ts := newTestSMTP(t, SMTPImplicit)
	h := newMailHarness(t, ts)
	h.setupTenant("acme", "web")
	r := h.q("POST", "/v1/workspaces/acme/invitations", testAdminToken, map[string]any{"email": "new@example.com", "role": "viewer"})
	mustStatus(t, r, 201, "")
	token := r.json(t)["token"].(string)
	if _, err := h.srv.deliverMail(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := ts.mails()
	if len(got) != 1 {
		t.Fatalf("got %d mails, want 1", len(got))
	}
	m := parseMail(t, got[0].Data)
	if want := h.query.URL + "/v1/ui/#invite=" + token; !strings.Contains(m.text, want) || !strings.Contains(m.html, want) {
		t.Errorf("the invitation lacks its link %s:\n%s", want, m.text)
	}
	if !strings.Contains(m.subject, "acme") {
		t.Errorf("got subject %q, want the workspace's name", m.subject)
	}
	// An invitation revoked before its mail went drops the mail.
	r = h.q("POST", "/v1/workspaces/acme/invitations", testAdminToken, map[string]any{"email": "late@example.com", "role": "viewer"})
	mustStatus(t, r, 201, "")
	mustStatus(t, h.q("DELETE", "/v1/workspaces/acme/invitations/"+r.json(t)["id"].(string), testAdminToken, nil), 204, "")
	if _, err := h.srv.deliverMail(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := ts.mails(); len(got) != 1 {
		t.Errorf("got %d mails, want 1: the revoked invitation's is not sent", len(got))
	}
}

func TestMessageEncodesQuotedPrintableWithCRLF(t *testing.T) {
	t.Parallel()
	from, _ := mail.ParseAddress(testMailFrom)
	msg := &mailMessage{From: from, To: "a@example.com", Subject: "Plain subject", Date: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Key: "k",
		Text: "héllo " + strings.Repeat("x", 100) + "\nline two", HTML: "<p>héllo</p>"}
	raw, err := msg.encode()
	if err != nil {
		t.Fatal(err)
	}
	m := parseMail(t, raw)
	if m.subject != "Plain subject" || m.header.Get("Subject") != "Plain subject" {
		t.Errorf("got Subject %q, want an ASCII subject as is", m.header.Get("Subject"))
	}
	if !strings.HasPrefix(m.text, "héllo "+strings.Repeat("x", 100)+"\r\nline two") {
		t.Errorf("got text %q", m.text)
	}
	for _, line := range strings.Split(string(raw), "\r\n") {
		if len(line) > 78 {
			t.Errorf("a line of %d characters: %q", len(line), line)
		}
	}
	again, _ := msg.encode()
	if !bytes.Equal(raw, again) {
		t.Errorf("the same mail encoded twice differs")
	}
	// A long subject that is not ASCII is encoded words, folded between
	// them, and decodes back.
	msg.Subject = strings.Repeat("Wöchentlicher Bericht für die Website ", 4)
	raw, _ = msg.encode()
	m = parseMail(t, raw)
	if m.subject != msg.Subject {
		t.Errorf("got Subject %q back, want %q", m.subject, msg.Subject)
	}
	head, _, _ := strings.Cut(string(raw), "\r\n\r\n")
	for _, line := range strings.Split(head, "\r\n") {
		if len(line) > 78 {
			t.Errorf("a header line of %d characters: %q", len(line), line)
		}
	}
}

func decodeInto(t *testing.T, body []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
}

// lockedBuffer is a log's buffer that goroutines may write at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Logs name no recipient and never the SMTP password, even when the SMTP
// server's refusal quotes the address.
func TestMailLogsHoldNoAddressOrPassword(t *testing.T) {
	t.Parallel()
	ts := newTestSMTP(t, SMTPStartTLS)
	ts.setFault(func(int) error {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "<ana@example.com>: Recipient address rejected"}
	})
	var logs lockedBuffer
	h := newMailHarness(t, ts, func(c *Config) { c.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	h.setupTenant("acme", "web")
	h.addUser("ana@example.com", "owner", "acme")
	subscribeReports(h, "web", "ana@example.com", true, false)
	mustStatus(t, h.q("POST", "/v1/workspaces/acme/invitations", testAdminToken, map[string]any{"email": "bo@example.com", "role": "viewer"}), 201, "")
	mustStatus(t, h.q("POST", "/v1/auth/password/forgot", "", map[string]any{"email": "ana@example.com"}), 202, "")
	toMonday(h)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		// The reset mail is made after the answer: poll until it is in.
		if h.count(`SELECT COUNT(*) FROM mail_outbox WHERE kind = 'password_reset'`) == 1 {
			break
		}
	}
	h.srv.mailRound(context.Background())
	if n := ts.dataCount(); n != 3 {
		t.Fatalf("got %d attempts, want 3 (report, invitation, reset)", n)
	}
	out := logs.String()
	if !strings.Contains(out, "SMTP 550 5.1.1") {
		t.Errorf("the log lacks the failures' codes:\n%s", out)
	}
	for _, secret := range []string{"@example.com", testSMTPPassword} {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds %q:\n%s", secret, out)
		}
	}
}

// Reports are made through Leader: while another instance holds the job,
// a round enqueues nothing; once it is done, the next round does.
func TestMailScheduleGoesThroughLeader(t *testing.T) {
	t.Parallel()
	if !dbtest.Postgres() {
		t.Skip("one instance on SQLite: Leader always runs the job")
	}
	ts := newTestSMTP(t, SMTPStartTLS)
	a := newMailHarness(t, ts)
	a.setupTenant("acme", "web")
	subscribeReports(a, "web", "ana@example.com", true, false)
	toMonday(a)
	b := newHarnessAt(t, a.path)
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := b.db.Leader(context.Background(), "mail-schedule", func() error {
			close(inside)
			<-release
			return nil
		})
		done <- err
	}()
	<-inside
	if err := a.srv.scheduleMail(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := a.count(`SELECT COUNT(*) FROM mail_outbox`); n != 0 {
		t.Errorf("got %d mails made while the other instance held the job, want 0", n)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := a.srv.scheduleMail(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := a.count(`SELECT COUNT(*) FROM mail_outbox`); n != 1 {
		t.Errorf("got %d mails after the other instance's round, want 1", n)
	}
}

// The SMTP server's certificate is checked: one signed by no root the
// client trusts gets no mail.
func TestMailChecksTheServersCertificate(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{SMTPStartTLS, SMTPImplicit} {
		ts := newTestSMTP(t, mode)
		mc := ts.config()
		mc.TLSConfig = nil // the system's roots
		err := sendMail(context.Background(), mc, "a@tally.example", "b@example.com", []byte("Subject: x\r\n\r\nx\r\n"))
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: got %v, want a certificate error", mode, err)
		}
		if n := ts.dataCount(); n != 0 {
			t.Errorf("%s: got %d messages sent, want 0", mode, n)
		}
	}
}
