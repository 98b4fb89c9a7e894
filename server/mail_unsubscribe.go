package server

import (
	"html/template"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/storage"
)

// The unsubscribe link of every report and alert (docs/email.md#unsubscribe):
// /unsubscribe/<token> on the query API's listener, without signing in.
// The token is the subscription's id signed with the database's mail key,
// so it ends exactly that subscription (one kind of mail of one site to
// one address). GET shows a page that asks to confirm (a link scanner
// that follows it changes nothing); POST, the page's button or a mail
// client's RFC 8058 one-click POST, unsubscribes. A token that is not
// one and a subscription that ended get the same page, naming no address.

var unsubscribeTmpl = template.Must(template.New("unsubscribe").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer"><title>Tally: unsubscribe</title>
<style>body{font-family:sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem;color:#1f2937}button{font-size:1rem;padding:.5rem 1rem}</style>
</head><body>
<h1>{{.Title}}</h1>
<p>{{.Text}}</p>
{{if .Confirm}}<form method="post"><button type="submit">Unsubscribe</button></form>{{end}}
</body></html>
`))

type unsubscribeView struct {
	Title, Text string
	Confirm     bool
}

var unsubscribeGone = unsubscribeView{Title: "This link is not valid", Text: "This unsubscribe link is not valid, or its subscription has ended already: no more of that mail is sent."}

// kindText is what a subscription's mail is called on the page.
func kindText(kind string) string {
	switch kind {
	case storage.MailWeekly:
		return "the weekly report"
	case storage.MailMonthly:
		return "the monthly report"
	}
	return "the traffic alerts"
}

// unsubscribePage shows the confirmation page of a link.
//
// GET /unsubscribe/:token
func (s *Server) unsubscribePage(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	sub, ok, err := s.unsubscribeTarget(r, ps.ByName("token"))
	if err != nil {
		return err
	}
	if !ok {
		writeUnsubscribePage(w, http.StatusNotFound, unsubscribeGone)
		return nil
	}
	name := "a site"
	if site, found := s.db.Site(sub.SiteID); found {
		name = site.Name
	}
	writeUnsubscribePage(w, http.StatusOK, unsubscribeView{Title: "Unsubscribe?",
		Text: "Stop " + kindText(sub.Kind) + " of " + name + " to this address?", Confirm: true})
	return nil
}

// unsubscribe ends the link's subscription: 200 with a page saying so,
// the same when it had ended already (a second click, a client's retry).
//
// POST /unsubscribe/:token
func (s *Server) unsubscribe(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, ok, err := s.db.CheckUnsubscribeToken(r.Context(), ps.ByName("token"))
	if err != nil {
		return err
	}
	if !ok {
		writeUnsubscribePage(w, http.StatusNotFound, unsubscribeGone)
		return nil
	}
	if err := s.db.Unsubscribe(r.Context(), id); err != nil {
		return err
	}
	writeUnsubscribePage(w, http.StatusOK, unsubscribeView{Title: "Unsubscribed", Text: "This address gets no more of that mail. An admin of the site can subscribe it again."})
	return nil
}

// unsubscribeTarget is the live subscription a token names.
func (s *Server) unsubscribeTarget(r *http.Request, token string) (storage.MailSubscription, bool, error) {
	id, ok, err := s.db.CheckUnsubscribeToken(r.Context(), token)
	if err != nil || !ok {
		return storage.MailSubscription{}, false, err
	}
	return s.db.SubscriptionByID(r.Context(), id)
}

func writeUnsubscribePage(w http.ResponseWriter, status int, v unsubscribeView) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'")
	h.Set("X-Frame-Options", "DENY")
	w.WriteHeader(status)
	_ = unsubscribeTmpl.Execute(w, v)
}
