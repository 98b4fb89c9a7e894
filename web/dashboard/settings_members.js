// Settings › Members: a workspace's people and their roles, and its open
// invitations (docs/accounts.md#invitations). Owners change roles and
// remove members; owners and admins invite (an admin not as owner) and
// revoke. The API decides: a control shown here that the role may not use
// would answer 403 beside it.
(function () {
  "use strict";
  var ROLES = ["viewer", "admin", "owner"];

  TallySettings.register({ id: "members", title: "Members", section: "workspace", minRole: "admin", render: function (box, c) {
    var el = c.el;
    var ws = "/workspaces/" + encodeURIComponent(c.workspace);
    var owner = c.role === "owner";
    var me = c.account ? c.account.user.id : "";

    box.appendChild(el("p", { class: "hint", text: owner
      ? "Viewers read the dashboard; admins also manage keys, sites' settings, goals, webhooks and imports; owners also manage members."
      : "Only an owner changes roles or removes members; you can invite viewers and admins." }));
    var members = box.appendChild(el("div", { id: "members" }));

    function roleOptions(upTo, selected) {
      return ROLES.filter(function (r) { return upTo === "owner" || r !== "owner"; }).map(function (r) {
        return el("option", { value: r, selected: r === selected }, r);
      });
    }

    // A role change is a form of its own per row, so that its refusal
    // (the workspace's only owner) shows beside that row's select.
    function roleCell(m) {
      if (!owner) return m.role;
      var f = el("form", { class: "row-form", "data-user": m.user_id }, [
        el("select", { name: "role", "aria-label": "Role of " + m.email }, roleOptions("owner", m.role)),
        el("button", { type: "submit", class: "quiet" }, "Save")]);
      c.form(f, function (v) {
        return c.api(ws + "/members/" + encodeURIComponent(m.user_id), { method: "PATCH", body: { role: v.role } }).then(function (m2) {
          c.status(m2.email + " is now " + m2.role + ".");
          // Demoting oneself takes the page's rights away: read them again.
          return m2.user_id === me ? c.refresh() : list();
        });
      }, { last_owner: "role", invalid_role: "role", forbidden: "role" });
      return f;
    }

    function removeCell(m) {
      if (!owner) return "";
      var f = el("form", { class: "row-form" }, el("button", { type: "submit", class: "quiet danger-text" }, "Remove"));
      c.form(f, function () {
        return c.confirm("Remove " + m.email + " from this workspace? Their role here ends at once.").then(function (ok) {
          if (!ok) return;
          return c.api(ws + "/members/" + encodeURIComponent(m.user_id), { method: "DELETE" }).then(function () {
            c.status(m.email + " was removed.");
            return m.user_id === me ? c.refresh() : list();
          });
        });
      });
      return f;
    }

    function list() {
      return c.api(ws + "/members").then(function (b) {
        members.textContent = "";
        members.appendChild(c.table([
          { head: "Email", cell: function (m) { return m.email + (m.user_id === me ? " (you)" : ""); } },
          { head: "Role", cell: roleCell },
          { head: "Member since", cell: function (m) { return c.when(m.created_at); } },
          { head: "", cell: removeCell }], b.members, "No members yet: invite someone below."));
      });
    }

    box.appendChild(el("h3", { text: "Invite someone" }));
    var shown = box.appendChild(el("div", { id: "invitation-link" }));
    var invite = el("form", { id: "invite-form" }, [
      c.field("Email", "email", { type: "email", autocomplete: "off", required: true }),
      c.field("Role", "role", {}, function (a) { return el("select", a, roleOptions(c.role, "viewer")); }),
      el("button", { type: "submit" }, "Invite")]);
    c.form(invite, function (v) {
      return c.api(ws + "/invitations", { method: "POST", body: { email: v.email.trim(), role: v.role } }).then(function (inv) {
        invite.reset();
        shown.textContent = "";
        shown.appendChild(c.secret("Invitation link for " + inv.email + " (" + inv.role + ")", location.origin + inv.path));
        shown.appendChild(el("p", { class: "hint", text: "Send it to them yourself: it works once, until " + new Date(inv.expires_at).toLocaleString() + ". They choose a password when they open it." }));
        return invitations();
      });
    }, { invalid_email: "email", email_taken: "email", invalid_role: "role", forbidden: "role" });
    box.appendChild(invite);

    box.appendChild(el("h3", { text: "Open invitations" }));
    var open = box.appendChild(el("div", { id: "invitations" }));
    function revokeCell(inv) {
      if (inv.role === "owner" && !owner) return "";
      var f = el("form", { class: "row-form" }, el("button", { type: "submit", class: "quiet danger-text" }, "Revoke"));
      c.form(f, function () {
        return c.confirm("Revoke the invitation of " + inv.email + "? Its link stops working.").then(function (ok) {
          if (!ok) return;
          return c.api(ws + "/invitations/" + encodeURIComponent(inv.id), { method: "DELETE" }).then(function () {
            c.status("The invitation of " + inv.email + " was revoked.");
            return invitations();
          });
        });
      });
      return f;
    }
    function invitations() {
      return c.api(ws + "/invitations").then(function (b) {
        open.textContent = "";
        open.appendChild(c.table([
          { head: "Email", cell: function (i) { return i.email; } },
          { head: "Role", cell: function (i) { return i.role; } },
          { head: "Sent", cell: function (i) { return c.when(i.created_at); } },
          { head: "Expires", cell: function (i) { return c.when(i.expires_at); } },
          { head: "", cell: revokeCell }], b.invitations, "No open invitations."));
      });
    }
    return Promise.all([list(), invitations()]);
  } });
})();
