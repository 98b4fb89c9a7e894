// Settings › Email: a site's weekly and monthly email reports and its
// traffic alerts (docs/email.md). Admins and owners of the site's
// workspace (and the admin token) see it.
(function () {
  "use strict";
  TallySettings.register({ id: "email", title: "Email reports & alerts", section: "site", minRole: "admin", render: function (box, c) {
    var el = c.el;
    var base = "/sites/" + encodeURIComponent(c.site);
    var note = box.appendChild(el("p", { class: "hint", id: "mail-off", role: "note", hidden: true },
      "This server has no SMTP settings (SMTP_HOST, SMTP_FROM): what you set here is kept, and nothing is mailed until the operator sets them."));

    // Reports: one row per recipient, weekly and/or monthly.
    box.appendChild(el("h3", { text: "Email reports" }));
    box.appendChild(el("p", { class: "hint", text: "A summary of the last full week (Monday to Sunday) or month, in the site's time zone: visitors, visits, pageviews, bounce rate and visit duration against the period before, the top sources and pages." }));
    var list = box.appendChild(el("div", { id: "email-reports" }));
    function reports() {
      return c.api(base + "/email-reports").then(function (b) {
        note.hidden = b.mail_configured;
        list.textContent = "";
        list.appendChild(c.table([
          { head: "Email", cell: function (r) { return r.email; } },
          { head: "Weekly", cell: function (r) { return r.weekly ? "yes" : "no"; } },
          { head: "Monthly", cell: function (r) { return r.monthly ? "yes" : "no"; } },
          { head: "Since", cell: function (r) { return c.when(r.created_at); } },
          { head: "", cell: function (r) {
            return el("button", { type: "button", class: "quiet", onclick: function () {
              c.api(base + "/email-reports", { method: "DELETE", body: { email: r.email } }).then(reports, function (e) { c.status(e.message); });
            } }, "Remove");
          } }], b.recipients, "No one gets this site's reports."));
      });
    }
    var add = el("form", { class: "stack", id: "email-report-form" }, [
      c.field("Email", "email", { type: "email", autocomplete: "email", required: true }),
      el("label", { class: "check" }, [el("input", { type: "checkbox", name: "weekly", value: "on", checked: true }), " Weekly"]),
      el("label", { class: "check" }, [el("input", { type: "checkbox", name: "monthly", value: "on" }), " Monthly"]),
      el("button", { type: "submit" }, "Subscribe")]);
    c.form(add, function (v) {
      return c.api(base + "/email-reports", { method: "POST", body: { email: v.email, weekly: !!v.weekly, monthly: !!v.monthly } }).then(function () {
        add.reset();
        c.status("Subscribed.");
        return reports();
      });
    }, { invalid_email: "email", invalid_body: "weekly" });
    box.appendChild(add);

    // Alerts: thresholds and who gets them.
    box.appendChild(el("h3", { text: "Traffic alerts" }));
    box.appendChild(el("p", { class: "hint", text: "Spike: the visitors of the last 30 minutes reach the number (at most one mail an hour). Drop: yesterday's visitors fell by the percentage or more against the same weekday a week before, which had 10 or more (one mail a day). Leave a field empty to turn that rule off." }));
    var alerts = el("form", { class: "stack", id: "traffic-alert-form" }, [
      c.field("Recipients (one email per line)", "recipients", { rows: 3, required: true }, function (a) { return el("textarea", a); }),
      c.field("Spike: current visitors at least", "spike_visitors", { type: "number", min: 1, step: 1, inputmode: "numeric" }),
      c.field("Drop: percent fewer visitors", "drop_percent", { type: "number", min: 1, max: 100, step: 1, inputmode: "numeric" }),
      el("div", { class: "actions" }, [
        el("button", { type: "submit" }, "Save alerts"),
        el("button", { type: "button", class: "quiet", id: "alerts-off", hidden: true, onclick: function () {
          c.confirm("Turn this site's traffic alerts off and forget their recipients?").then(function (ok) {
            if (!ok) return;
            return c.api(base + "/traffic-alerts", { method: "DELETE" }).then(function () { c.status("Alerts off."); return loadAlerts(); });
          }).catch(function (e) { c.status(e.message); });
        } }, "Turn off")])]);
    function num(s) { return s === "" || s == null ? null : Number(s); }
    c.form(alerts, function (v) {
      var recipients = String(v.recipients || "").split(/[\s,;]+/).filter(Boolean);
      return c.api(base + "/traffic-alerts", { method: "PUT", body: { recipients: recipients, spike_visitors: num(v.spike_visitors), drop_percent: num(v.drop_percent) } }).then(function (a) {
        c.status("Alerts saved.");
        fillAlerts(a);
      });
    }, { invalid_email: "recipients", invalid_alert: "spike_visitors" });
    box.appendChild(alerts);
    function fillAlerts(a) {
      note.hidden = a.mail_configured;
      alerts.elements.recipients.value = a.recipients.join("\n");
      alerts.elements.spike_visitors.value = a.spike_visitors == null ? "" : a.spike_visitors;
      alerts.elements.drop_percent.value = a.drop_percent == null ? "" : a.drop_percent;
      alerts.querySelector("#alerts-off").hidden = a.updated_at == null;
    }
    function loadAlerts() { return c.api(base + "/traffic-alerts").then(fillAlerts); }
    return Promise.all([reports(), loadAlerts()]);
  } });
})();
