package server

import (
	htmltemplate "html/template"
	"strings"
	texttemplate "text/template"
)

// The bodies of every mail, text and HTML (docs/email.md#messages). The
// HTML is one table of inline styles, which mail clients render alike;
// html/template escapes every value (a site's name, a page's path).

var mailFuncs = map[string]any{"figure": formatFigure, "change": formatChange, "label": metricLabel, "count": func(v float64) string { return formatFigure("visitors", v) }}

var reportText = texttemplate.Must(texttemplate.New("report").Funcs(mailFuncs).Parse(`{{.R.Site.Name}}: {{.Title}} report, {{.R.From}} to {{.R.To}}
(change against {{.R.PrevFrom}} to {{.R.PrevTo}})

{{range .R.Figures}}{{label .Metric}}: {{figure .Metric .Value}} ({{change .Metric .Change}})
{{end}}
Top sources
{{range .R.Sources}}  {{.Name}}: {{count .Visitors}} visitors
{{else}}  none
{{end}}
Top pages
{{range .R.Pages}}  {{.Name}}: {{count .Visitors}} visitors
{{else}}  none
{{end}}
Dashboard: {{.Dashboard}}

You get this {{.Kind}} report because an admin of {{.R.Site.Name}} subscribed this address.
Unsubscribe: {{.Unsubscribe}}
`))

var reportHTML = htmltemplate.Must(htmltemplate.New("report").Funcs(mailFuncs).Parse(`<!DOCTYPE html>
<html><body style="font-family:sans-serif;color:#1f2937;margin:0;padding:16px">
<h1 style="font-size:20px;margin:0 0 4px">{{.R.Site.Name}}</h1>
<p style="margin:0 0 16px;color:#6b7280">{{.Title}} report, {{.R.From}} to {{.R.To}} (change against {{.R.PrevFrom}} to {{.R.PrevTo}})</p>
<table cellpadding="6" style="border-collapse:collapse;margin-bottom:16px">
{{range .R.Figures}}<tr><td>{{label .Metric}}</td><td style="font-weight:bold">{{figure .Metric .Value}}</td><td style="color:#6b7280">{{change .Metric .Change}}</td></tr>
{{end}}</table>
<h2 style="font-size:16px">Top sources</h2>
<table cellpadding="4">{{range .R.Sources}}<tr><td>{{.Name}}</td><td>{{count .Visitors}}</td></tr>{{else}}<tr><td>none</td></tr>{{end}}</table>
<h2 style="font-size:16px">Top pages</h2>
<table cellpadding="4">{{range .R.Pages}}<tr><td>{{.Name}}</td><td>{{count .Visitors}}</td></tr>{{else}}<tr><td>none</td></tr>{{end}}</table>
<p><a href="{{.Dashboard}}">Open the dashboard</a></p>
<p style="color:#6b7280;font-size:12px">You get this {{.Kind}} report because an admin of {{.R.Site.Name}} subscribed this address.
<a href="{{.Unsubscribe}}">Unsubscribe</a></p>
</body></html>
`))

// reportView is what the report templates read.
type reportView struct {
	R                                   *mailReport
	Title, Kind, Dashboard, Unsubscribe string
}

func (r *mailReport) view(s *Server, unsubscribe string) reportView {
	return reportView{R: r, Title: titleKind(r.Kind), Kind: r.Kind, Dashboard: s.publicBase() + "/v1/ui/", Unsubscribe: unsubscribe}
}

// render returns the report's text and HTML bodies, given a recipient's
// unsubscribe link.
func (r *mailReport) render(s *Server) (text, html func(string) string) {
	return func(u string) string { return execText(reportText, r.view(s, u)) },
		func(u string) string { return execHTML(reportHTML, r.view(s, u)) }
}

var alertText = texttemplate.Must(texttemplate.New("alert").Parse(`{{.Site}}: {{.Headline}}

{{.Detail}}

Dashboard: {{.Dashboard}}

You get these alerts because an admin of {{.Site}} set this address as a recipient.
Unsubscribe: {{.Unsubscribe}}
`))

var alertHTML = htmltemplate.Must(htmltemplate.New("alert").Parse(`<!DOCTYPE html>
<html><body style="font-family:sans-serif;color:#1f2937;margin:0;padding:16px">
<h1 style="font-size:20px;margin:0 0 8px">{{.Site}}: {{.Headline}}</h1>
<p>{{.Detail}}</p>
<p><a href="{{.Dashboard}}">Open the dashboard</a></p>
<p style="color:#6b7280;font-size:12px">You get these alerts because an admin of {{.Site}} set this address as a recipient.
<a href="{{.Unsubscribe}}">Unsubscribe</a></p>
</body></html>
`))

// alertView is what the alert templates read.
type alertView struct {
	Site, Headline, Detail, Dashboard, Unsubscribe string
}

var linkText = texttemplate.Must(texttemplate.New("link").Parse(`{{.Intro}}

{{.Link}}

{{.Outro}}
`))

var linkHTML = htmltemplate.Must(htmltemplate.New("link").Parse(`<!DOCTYPE html>
<html><body style="font-family:sans-serif;color:#1f2937;margin:0;padding:16px">
<p>{{.Intro}}</p>
<p><a href="{{.Link}}">{{.Action}}</a></p>
<p style="color:#6b7280;font-size:12px">{{.Outro}}</p>
</body></html>
`))

// linkView is an account mail's: one link, what it does, and until when.
type linkView struct {
	Intro, Action, Link, Outro string
}

func execText(t *texttemplate.Template, v any) string {
	var b strings.Builder
	if err := t.Execute(&b, v); err != nil {
		panic(err) // the templates are fixed: a failure is a bug
	}
	return b.String()
}

func execHTML(t *htmltemplate.Template, v any) string {
	var b strings.Builder
	if err := t.Execute(&b, v); err != nil {
		panic(err)
	}
	return b.String()
}
