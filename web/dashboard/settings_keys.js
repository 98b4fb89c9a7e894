// Settings › API keys of the workspace (docs/dashboard.md#settings,
// docs/api.md#authentication): create one with its scopes and, optionally,
// the sites it is restricted to; its plaintext is shown this once, with a
// copy button, and is gone on reload (only its hash is stored). The list
// shows each key's metadata; revoking asks first.
(function () {
  "use strict";

  var SCOPES = [
    { value: "query:read", label: "query:read — read reports (a dashboard, the Stats API)" },
    { value: "ingest:write", label: "ingest:write — send events (a server, a Segment SDK)" },
    { value: "admin", label: "admin — everything in the workspace (keys, audit, DLQ, GDPR, settings)" }];

  TallySettings.register({ id: "keys", title: "API keys", section: "workspace", minRole: "admin", render: function (box, c) {
    var el = c.el;
    var base = "/workspaces/" + encodeURIComponent(c.workspace) + "/keys";
    var shown = box.appendChild(el("div", { id: "key-plaintext" }));
    var list = box.appendChild(el("div", { id: "key-list" }));

    function load() {
      return c.api(base).then(function (b) {
        list.textContent = "";
        var keys = (b.keys || []).filter(function (k) { return !k.revoked_at; });
        list.appendChild(c.table([
          { head: "Label", cell: function (k) { return el("strong", { text: k.label }); } },
          { head: "Scopes", cell: function (k) { return k.scopes.join(", "); } },
          { head: "Sites", cell: function (k) { return k.sites ? k.sites.join(", ") : "every site"; } },
          { head: "Created", cell: function (k) { return c.when(k.created_at); } },
          { head: "Last used", cell: function (k) { return k.last_used_at ? c.when(k.last_used_at) : "never"; } },
          { head: "", cell: function (k) {
            return el("button", { type: "button", class: "quiet danger-text", "data-revoke": k.id, onclick: function () {
              c.confirm("Revoke the key " + k.label + "? Whatever uses it stops working at once.").then(function (ok) {
                if (!ok) return;
                return c.api(base + "/" + encodeURIComponent(k.id), { method: "DELETE" }).then(function () { c.status("Revoked " + k.label + "."); return load(); });
              }).catch(function (e) { c.status(e.message); });
            } }, "Revoke");
          } }], keys, "No keys yet."));
      });
    }

    box.appendChild(el("h3", { text: "New key" }));
    var scopes = el("fieldset", { name: "scopes", class: "checks" }, [el("legend", { text: "Scopes" })].concat(SCOPES.map(function (s) {
      return el("label", { class: "check" }, [el("input", { type: "checkbox", name: "scope", value: s.value }), " " + s.label]);
    })));
    var sites = el("fieldset", { name: "sites", class: "checks" }, [el("legend", { text: "Sites (none checked: every site, and sites created later)" })].concat(c.sites.map(function (s) {
      return el("label", { class: "check" }, [el("input", { type: "checkbox", name: "site", value: s.id }), " " + s.name + " (" + s.id + ")"]);
    })));
    var f = el("form", { class: "stack", id: "key-create" }, [
      c.field("Label", "label", { required: true, autocomplete: "off", placeholder: "dashboard" }),
      scopes, c.sites.length ? sites : null,
      el("button", { type: "submit" }, "Create key")]);
    c.form(f, function (v) {
      var body = { label: v.label, scopes: v.scope || [] };
      if (v.site && v.site.length) body.sites = v.site;
      return c.api(base, { method: "POST", body: body }).then(function (k) {
        f.reset();
        shown.textContent = "";
        shown.appendChild(c.secret("The key " + k.label, k.plaintext));
        return load();
      });
    }, { invalid_label: "label", invalid_scopes: "scopes", invalid_sites: "sites" });
    box.appendChild(f);
    return load();
  } });
})();
