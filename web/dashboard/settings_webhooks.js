// Settings › Webhook secrets: the signing secrets of a site's webhook
// receiver, per adapter (docs/intake.md#webhooks). A secret is shown once,
// when made; while two are active (a rotation) either one verifies.
(function () {
  "use strict";
  var ADAPTERS = [{ id: "payments", label: "Payments (Stripe-style signatures)" }];

  TallySettings.register({ id: "webhooks", title: "Webhook secrets", section: "site", minRole: "admin", render: function (box, c) {
    var el = c.el;
    var base = "/sites/" + encodeURIComponent(c.site) + "/webhook-secrets";

    box.appendChild(el("p", { class: "hint" }, ["The processor sends its events to ",
      el("code", { id: "webhook-url", text: location.origin + "/v1/webhooks/payments/" + c.site }),
      ", signed with a secret made here. To rotate, make a new secret, give it to the processor, then revoke the old one."]));
    var shown = box.appendChild(el("div", { id: "webhook-secret" }));
    var make = el("form", { id: "webhook-form" }, [
      c.field("Adapter", "adapter", {}, function (a) {
        return el("select", a, ADAPTERS.map(function (x) { return el("option", { value: x.id }, x.label); }));
      }),
      el("button", { type: "submit" }, "Create secret")]);
    c.form(make, function (v) {
      return c.api(base, { method: "POST", body: { adapter: v.adapter } }).then(function (s) {
        shown.textContent = "";
        shown.appendChild(c.secret("Webhook secret (" + s.adapter + ")", s.secret));
        return list();
      });
    }, { invalid_adapter: "adapter" });
    box.appendChild(make);

    box.appendChild(el("h3", { text: "Secrets" }));
    var secrets = box.appendChild(el("div", { id: "webhook-secrets" }));
    function revokeCell(s) {
      if (s.revoked_at) return el("span", {}, ["Revoked ", c.when(s.revoked_at)]);
      var f = el("form", { class: "row-form" }, el("button", { type: "submit", class: "quiet danger-text" }, "Revoke"));
      c.form(f, function () {
        return c.confirm("Revoke this " + s.adapter + " secret? Events signed with it are refused from now on.").then(function (ok) {
          if (!ok) return;
          return c.api(base + "/" + encodeURIComponent(s.id), { method: "DELETE" }).then(function () {
            c.status("The secret was revoked.");
            return list();
          });
        });
      });
      return f;
    }
    function list() {
      return c.api(base).then(function (b) {
        secrets.textContent = "";
        secrets.appendChild(c.table([
          { head: "Id", cell: function (s) { return String(s.id); } },
          { head: "Adapter", cell: function (s) { return s.adapter; } },
          { head: "Created", cell: function (s) { return c.when(s.created_at); } },
          { head: "State", cell: revokeCell }], b.secrets, "No secrets: the receiver refuses every event (401) until one is made."));
      });
    }
    return list();
  } });
})();
