// Settings › Shared links: a site's read-only dashboards at unguessable
// URLs (docs/sharing.md): made (the URL shown once, with a copy button),
// listed, changed (label, password set or removed, the origins that may
// embed it) and revoked after a confirmation. Admins and owners.
(function () {
  "use strict";
  TallySettings.register({ id: "shared-links", title: "Shared links", section: "site", minRole: "admin", render: function (box, c) {
    var el = c.el;
    var base = "/sites/" + encodeURIComponent(c.site) + "/shared-links";
    box.appendChild(el("p", {}, ["Anyone with a link sees this site's dashboard, read-only, and nothing else. ",
      "Its URL is shown once: copy it when you make the link."]));

    // origins reads a textarea's lines (commas too) as a list.
    function origins(text) {
      return String(text || "").split(/[\s,]+/).filter(Boolean);
    }
    function originsField(value) {
      return c.field("Sites that may embed it (one origin a line, such as https://intranet.example.com)", "allowed_origins",
        { rows: 2, autocomplete: "off", spellcheck: "false" }, function (a) { var t = el("textarea", a); t.value = value || ""; return t; });
    }

    var made = box.appendChild(el("div", { id: "shared-link-made" }));
    box.appendChild(el("h3", { text: "New link" }));
    var create = el("form", { class: "stack", id: "shared-link-create" }, [
      c.field("Label", "label", { required: true, maxlength: 120, placeholder: "Board", autocomplete: "off" }),
      c.field("Password (optional, 10 characters or more)", "password", { type: "password", autocomplete: "new-password" }),
      originsField(""),
      el("button", { type: "submit" }, "Make the link")]);
    c.form(create, function (v) {
      var body = { label: v.label, allowed_origins: origins(v.allowed_origins) };
      if (v.password) body.password = v.password;
      return c.api(base, { method: "POST", body: body }).then(function (l) {
        create.reset();
        made.textContent = "";
        made.appendChild(c.secret("The link “" + l.label + "”", l.url));
        return list();
      });
    });
    box.appendChild(create);

    box.appendChild(el("h3", { text: "Links" }));
    var listBox = box.appendChild(el("div", { id: "shared-links" }));
    var editBox = box.appendChild(el("div", { id: "shared-link-edit" }));

    function edit(l) {
      editBox.textContent = "";
      var f = el("form", { class: "stack", id: "shared-link-form" }, [
        el("h3", { text: "Change “" + l.label + "”" }),
        c.field("Label", "label", { required: true, maxlength: 120, value: l.label, autocomplete: "off" }),
        c.field(l.password ? "New password (empty: keep it)" : "Password (empty: none)", "password", { type: "password", autocomplete: "new-password" }),
        l.password ? c.field("Remove the password", "remove_password", { type: "checkbox", value: "yes" }) : null,
        originsField(l.allowed_origins.join("\n")),
        el("div", { class: "actions" }, [
          el("button", { type: "submit" }, "Save"),
          el("button", { type: "button", class: "quiet", onclick: function () { editBox.textContent = ""; } }, "Cancel")])]);
      c.form(f, function (v) {
        var body = { label: v.label, allowed_origins: origins(v.allowed_origins) };
        if (v.remove_password) body.password = null;
        else if (v.password) body.password = v.password;
        return c.api(base + "/" + encodeURIComponent(l.id), { method: "PATCH", body: body }).then(function () {
          editBox.textContent = "";
          c.status("Saved “" + v.label + "”.");
          return list();
        });
      });
      editBox.appendChild(f);
      f.elements.label.focus();
    }

    function revoke(l) {
      return c.confirm("Revoke the link “" + l.label + "”? Its URL stops working at once, for everyone who has it.").then(function (ok) {
        if (!ok) return;
        return c.api(base + "/" + encodeURIComponent(l.id), { method: "DELETE" }).then(function () {
          editBox.textContent = "";
          c.status("Revoked “" + l.label + "”.");
          return list();
        });
      }).catch(function (e) { c.status(e.message); });
    }

    function list() {
      return c.api(base).then(function (b) {
        listBox.textContent = "";
        listBox.appendChild(c.table([
          { head: "Label", cell: function (l) { return l.label; } },
          { head: "Password", cell: function (l) { return l.password ? "Yes" : "No"; } },
          { head: "Embeddable by", cell: function (l) { return l.allowed_origins.length ? l.allowed_origins.join(", ") : "No other site"; } },
          { head: "Made", cell: function (l) { return c.when(l.created_at); } },
          { head: "", cell: function (l) {
            return el("span", { class: "row-actions" }, [
              el("button", { type: "button", class: "quiet", onclick: function () { edit(l); } }, "Change"),
              el("button", { type: "button", class: "quiet", onclick: function () { revoke(l); } }, "Revoke")]);
          } }], b.shared_links, "No shared links yet."));
      });
    }
    return list();
  } });
})();
