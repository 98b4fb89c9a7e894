// Settings › Sites (docs/dashboard.md#settings): the workspace's sites,
// each site's own settings (name, time zone, retention, aliases), and, for
// an owner or the admin token, creating sites and deleting one behind a
// confirmation that asks to type its id (docs/accounts.md#roles).
(function () {
  "use strict";

  // timeZones is the browser's IANA list, for the time zone's suggestions;
  // the field takes any text, and the API says whether it is a zone.
  function timeZones() {
    var list = [];
    try { list = Intl.supportedValuesOf("timeZone"); } catch (e) { list = []; }
    if (list.indexOf("UTC") < 0) list = ["UTC"].concat(list);
    return list;
  }

  TallySettings.register({ id: "sites", title: "Sites", section: "workspace", minRole: "admin", render: function (box, c) {
    var el = c.el;
    var owner = c.role === "owner";
    box.appendChild(el("p", { class: "empty", text: owner ? "The workspace's sites. Pick one to change its settings; deleting a site deletes all its data." :
      "The workspace's sites. Pick one to change its settings; an owner creates and deletes sites." }));
    box.appendChild(c.table([
      { head: "Site", cell: function (s) {
        return el("a", { href: "?" + new URLSearchParams({ ws: c.workspace, site: s.id, page: "site" }), onclick: function (ev) { ev.preventDefault(); c.go("site", s.id); } },
          [el("strong", { text: s.name }), " ", el("code", { text: s.id })]);
      } },
      { head: "", cell: function (s) {
        if (!owner) return "";
        return el("button", { type: "button", class: "quiet danger-text", "data-delete": s.id, onclick: function () {
          c.confirm("Delete the site " + s.name + " (" + s.id + ") and all its data: events, sessions, goals, funnels, imports. This cannot be undone.", s.id).then(function (ok) {
            if (!ok) return;
            return c.api("/workspaces/" + encodeURIComponent(c.workspace) + "/sites/" + encodeURIComponent(s.id), { method: "DELETE" }).then(function () {
              return c.refresh().then(function () { c.status("Deleted the site " + s.id + "."); });
            });
          }).catch(function (e) { c.status(e.message); });
        } }, "Delete");
      } }], c.sites, "No sites yet."));

    if (!owner) return;
    box.appendChild(el("h3", { text: "New site" }));
    var f = el("form", { id: "site-create" }, [
      c.field("Site id", "id", { required: true, autocomplete: "off", placeholder: "acme-web", pattern: "[A-Za-z0-9_-]{1,64}", title: "letters, digits, - and _" }),
      c.field("Name", "name", { required: true, autocomplete: "off", placeholder: "Acme website" }),
      el("button", { type: "submit" }, "Create site")]);
    c.form(f, function (v) {
      return c.api("/workspaces/" + encodeURIComponent(c.workspace) + "/sites", { method: "POST", body: { id: v.id, name: v.name } }).then(function (s) {
        return c.refresh().then(function () {
          c.go("site", s.id);
          c.status("Created the site " + s.id + ": add the tracking snippet with data-site=\"" + s.id + "\".");
        });
      });
    }, { invalid_site_id: "id", site_id_taken: "id", invalid_name: "name" });
    box.appendChild(f);
  } });

  TallySettings.register({ id: "site", title: "Site settings", section: "site", minRole: "admin", render: function (box, c) {
    var el = c.el;
    var path = "/sites/" + encodeURIComponent(c.site);
    return c.api(path).then(function (s) {
      var zones = el("datalist", { id: "time-zones" }, timeZones().map(function (z) { return el("option", { value: z }); }));
      var f = el("form", { class: "stack", id: "site-form" }, [
        c.field("Name", "name", { value: s.name, required: true, autocomplete: "off" }),
        c.field("Time zone (IANA, the days of every report)", "time_zone", { value: s.time_zone, list: "time-zones", autocomplete: "off", spellcheck: "false" }),
        zones,
        c.field("Retention in days (empty: the server's RETENTION_DAYS; 0: keep everything)", "retention_days",
          { value: s.retention_days == null ? "" : s.retention_days, inputmode: "numeric", autocomplete: "off" }),
        c.field("Aliases (other host names the trackers may send, one a line)", "aliases", { rows: 3, spellcheck: "false" }, function (a) {
          var t = el("textarea", a);
          t.value = (s.aliases || []).join("\n");
          return t;
        }),
        el("button", { type: "submit" }, "Save")]);
      c.form(f, function (v) {
        // Only what changed: an unchanged field writes nothing.
        var body = {};
        if (v.name !== s.name) body.name = v.name;
        if (v.time_zone !== s.time_zone) body.time_zone = v.time_zone;
        var days = v.retention_days.trim();
        var was = s.retention_days == null ? "" : String(s.retention_days);
        if (days !== was) body.retention_days = days === "" ? null : (/^-?\d+$/.test(days) ? Number(days) : days);
        var aliases = v.aliases.split(/[\s,]+/).filter(Boolean);
        if (aliases.join(" ") !== (s.aliases || []).join(" ")) body.aliases = aliases;
        if (!Object.keys(body).length) { c.status("Nothing changed."); return; }
        return c.api(path, { method: "PATCH", body: body }).then(function (n) {
          s = n;
          f.elements.aliases.value = (n.aliases || []).join("\n");
          // a new name shows in the site picker: read the sites again, then say so
          return (body.name ? c.refresh() : Promise.resolve()).then(function () { c.status("Saved."); });
        });
      }, { invalid_name: "name", invalid_time_zone: "time_zone", invalid_retention_days: "retention_days", invalid_aliases: "aliases", alias_taken: "aliases" });
      box.appendChild(f);
      box.appendChild(el("p", { class: "empty" }, ["Created ", c.when(s.created_at), s.purged_before ? "; raw events before " + s.purged_before + " were purged by retention." : "."]));
    });
  } });
})();
