// Settings › Your account: the signed-in person's password, sessions and
// two-factor sign-in (docs/accounts.md). Any role sees it; the admin token
// has no account, so not this page.
(function () {
  "use strict";
  TallySettings.register({ id: "account", title: "Your account", section: "account", minRole: "viewer", render: function (box, c) {
    var el = c.el;
    var me = c.account.user;
    box.appendChild(el("p", {}, ["Signed in as ", el("strong", { text: me.email }), "."]));

    // The password: changing it ends every other session.
    box.appendChild(el("h3", { text: "Password" }));
    var pw = el("form", { class: "stack", id: "password-form" }, [
      c.field("Current password", "current_password", { type: "password", autocomplete: "current-password", required: true }),
      c.field("New password", "new_password", { type: "password", autocomplete: "new-password", minlength: 10, required: true }),
      el("button", { type: "submit" }, "Change password")]);
    c.form(pw, function (v) {
      return c.api("/auth/password", { method: "POST", body: { current_password: v.current_password, new_password: v.new_password } }).then(function () {
        pw.reset();
        c.status("Password changed; your other sessions are signed out.");
        return sessions();
      });
    }, { forbidden: "current_password", invalid_password: "new_password" });
    box.appendChild(pw);

    box.appendChild(el("h3", { text: "Sessions" }));
    var list = box.appendChild(el("div", { id: "sessions" }));
    function sessions() {
      return c.api("/auth/sessions").then(function (b) {
        list.textContent = "";
        list.appendChild(c.table([
          { head: "Signed in", cell: function (s) { return el("span", {}, [c.when(s.created_at), s.current ? " (this one)" : ""]); } },
          { head: "Last seen", cell: function (s) { return c.when(s.last_seen_at); } },
          { head: "Expires", cell: function (s) { return c.when(s.expires_at); } },
          { head: "", cell: function (s) {
            return s.current ? "" : el("button", { type: "button", class: "quiet", onclick: function () {
              c.api("/auth/sessions/" + encodeURIComponent(s.id), { method: "DELETE" }).then(sessions, function (e) { c.status(e.message); });
            } }, "Sign out");
          } }], b.sessions));
      });
    }

    box.appendChild(el("h3", { text: "Two-factor sign-in" }));
    var totp = box.appendChild(el("div", { id: "totp" }));
    function showTOTP() {
      totp.textContent = "";
      if (c.account.user.totp_enabled) {
        totp.appendChild(el("p", { text: "On: sign-in asks for a code from your authenticator app." }));
        var off = el("form", { class: "stack" }, [
          c.field("Password", "password", { type: "password", autocomplete: "current-password", required: true }),
          c.field("Code", "code", { inputmode: "numeric", autocomplete: "one-time-code", pattern: "[0-9]{6}", required: true }),
          el("button", { type: "submit", class: "danger" }, "Turn off")]);
        c.form(off, function (v) {
          return c.api("/auth/totp/disable", { method: "POST", body: { password: v.password, code: v.code } }).then(function () {
            c.account.user.totp_enabled = false; showTOTP();
          });
        }, { forbidden: "password", invalid_password: "password", invalid_totp: "code" });
        totp.appendChild(off);
        return;
      }
      totp.appendChild(el("p", { text: "Off." }));
      var on = el("form", {}, [el("button", { type: "submit" }, "Set up")]);
      c.form(on, function () {
        return c.api("/auth/totp", { method: "POST", body: {} }).then(function (t) {
          totp.textContent = "";
          totp.appendChild(c.secret("Add this to your authenticator app", t.uri));
          var confirm = el("form", { class: "stack" }, [
            c.field("Code from the app", "code", { inputmode: "numeric", autocomplete: "one-time-code", pattern: "[0-9]{6}", required: true }),
            el("button", { type: "submit" }, "Turn on")]);
          c.form(confirm, function (v) {
            return c.api("/auth/totp/confirm", { method: "POST", body: { code: v.code } }).then(function () {
              c.account.user.totp_enabled = true; showTOTP();
            });
          }, { invalid_totp: "code" });
          totp.appendChild(confirm);
        });
      });
      totp.appendChild(on);
    }
    showTOTP();
    return sessions();
  } });
})();
