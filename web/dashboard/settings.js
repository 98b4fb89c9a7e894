// Tally settings: the shell of /v1/ui/settings.html (docs/dashboard.md#settings).
// It signs in as the dashboard does (the token in sessionStorage, or the
// account's session cookie with its CSRF token), picks the workspace and
// the site, and shows one page at a time. Each page is a file of its own
// (settings_*.js) that registers itself:
//
//   TallySettings.register({ id: "sites", title: "Sites", section: "workspace",
//     minRole: "admin", render: function (container, ctx) { ... } });
//
// section "account" pages are about the signed-in person (any role),
// "workspace" pages about the workspace, "site" pages about the picked
// site (ctx.site). render may return a promise. Everything a
// page needs from the server goes through ctx.api, and every form through
// ctx.form, so the API's own error messages show beside their fields.
(function () {
  "use strict";
  var $ = function (s) { return document.querySelector(s); };
  var ROLES = { viewer: 1, admin: 2, owner: 3 };
  var pages = [];
  var token = sessionStorage.getItem("tally_token");
  var account = null; // GET /v1/auth/session's answer when signed in with an account
  var workspaces = []; // [{slug, name, role, sites: [{id, name}]}]
  var state = { ws: "", site: "", page: "" };

  function status(msg) { $("#status").textContent = msg || ""; }

  // request calls the API under /v1 with the dashboard's credentials and
  // answers the JSON body; a failure is an Error with the envelope's
  // status, code, message and details (docs/api.md#api-walk-through).
  function request(path, opts) {
    opts = opts || {};
    var headers = { Accept: "application/json" };
    if (opts.body != null && !(opts.body instanceof Blob) && !(opts.body instanceof FormData) && typeof opts.body !== "string") {
      opts.body = JSON.stringify(opts.body);
      headers["Content-Type"] = "application/json";
    }
    Object.keys(opts.headers || {}).forEach(function (k) { headers[k] = opts.headers[k]; });
    opts.headers = authHeaders(headers);
    return fetch("/v1" + path, opts).then(function (r) {
      if (r.status === 204) return null;
      return r.json().catch(function () { return null; }).then(function (body) {
        if (!r.ok) throw apiError(r.status, body);
        return body;
      });
    });
  }

  // authHeaders adds the credential: the bearer token, or the session's
  // CSRF token (the session cookie goes by itself).
  function authHeaders(h) {
    h = h || {};
    if (token) h.Authorization = "Bearer " + token;
    else if (account) h["X-CSRF-Token"] = account.csrf_token;
    return h;
  }

  function apiError(code, body) {
    var env = (body && body.error) || {};
    var e = new Error(env.message || "HTTP " + code);
    e.status = code;
    e.code = env.code || "";
    e.details = env.details || [];
    return e;
  }

  // el makes an element: el("button", {class: "quiet", onclick: f}, "Revoke").
  // Text children are text nodes, never HTML.
  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      var v = attrs[k];
      if (v == null || v === false) return;
      if (k.slice(0, 2) === "on") e.addEventListener(k.slice(2), v);
      else if (k === "class") e.className = v;
      else if (k === "text") e.textContent = String(v);
      else if (v === true) e.setAttribute(k, "");
      else e.setAttribute(k, String(v));
    });
    [].concat(children == null ? [] : children).forEach(function (c) {
      if (c == null || c === false) return;
      e.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
    });
    return e;
  }

  // field makes a labelled input, select or textarea; its name is the API
  // field its errors come back for.
  function field(label, name, attrs, control) {
    attrs = attrs || {};
    attrs.name = name;
    if (!attrs.id) attrs.id = "f-" + name + "-" + (++fieldSeq);
    var input = control ? control(attrs) : el("input", attrs);
    return el("label", { class: "field", for: attrs.id }, [el("span", { class: "field-label", text: label }), input]);
  }
  var fieldSeq = 0;

  // fieldName is the form field an error detail's path names: a JSON
  // pointer ("/retention_days", "/aliases/2") or a dotted path, its first
  // segment.
  function fieldName(path) {
    return String(path || "").replace(/^[/$.]+/, "").split(/[/.[]/)[0];
  }

  function clearErrors(form) {
    [].slice.call(form.querySelectorAll(".field-error")).forEach(function (n) { n.remove(); });
    [].slice.call(form.querySelectorAll("[aria-invalid]")).forEach(function (n) { n.removeAttribute("aria-invalid"); });
  }

  // showError puts an API error beside the field it is about: the field
  // its details name, else the one codes maps its code to, else the form.
  function showError(form, e, codes) {
    var shown = false;
    (e.details || []).forEach(function (d) {
      var input = d.path != null && form.elements[fieldName(d.path)];
      if (input && input.nodeType) shown = besideField(input, e.message + (d.message && e.message.indexOf(d.message) < 0 ? ": " + d.message : "")) || shown;
    });
    if (shown) return;
    var name = codes && codes[e.code];
    var input = name && form.elements[name];
    if (input && input.nodeType && besideField(input, e.message)) return;
    var box = form.querySelector(".form-error") || form.appendChild(el("p", { class: "form-error" }));
    box.appendChild(el("span", { class: "field-error", role: "alert", text: e.message }));
  }

  function besideField(input, msg) {
    input.setAttribute("aria-invalid", "true");
    var msgEl = el("span", { class: "field-error", role: "alert", id: input.id + "-error", text: msg });
    input.setAttribute("aria-describedby", msgEl.id);
    (input.closest("label") || input).insertAdjacentElement("afterend", msgEl);
    return true;
  }

  // form wires a form: on submit it clears the errors shown, calls
  // submit(values, form), and shows its failure beside the fields
  // (codes: {error_code: "field_name"} for errors without details).
  function form(f, submit, codes) {
    f.addEventListener("submit", function (ev) {
      ev.preventDefault();
      clearErrors(f);
      var button = f.querySelector("button[type=submit], button:not([type])");
      if (button) button.disabled = true;
      var values = {};
      [].slice.call(f.elements).forEach(function (x) {
        if (!x.name) return;
        if (x.type === "checkbox") { if (x.checked) (values[x.name] = values[x.name] || []).push(x.value); }
        else values[x.name] = x.value;
      });
      Promise.resolve().then(function () { return submit(values, f); }).then(function () {
        if (button) button.disabled = false;
      }, function (e) {
        if (button) button.disabled = false;
        if (e && e.status === 401) return signedOut();
        showError(f, e || new Error("failed"), codes);
      });
    });
    return f;
  }

  // confirm asks before something that cannot be undone; with typed, the
  // person types that text to confirm. It answers a promise of true/false.
  function confirm(text, typed) {
    var d = $("#confirm");
    $("#confirm-text").textContent = text;
    $("#confirm-type-label").hidden = !typed;
    $("#confirm-type").value = "";
    $("#confirm-type-hint").textContent = typed ? "Type " + typed + " to confirm" : "";
    $("#confirm-ok").disabled = !!typed;
    $("#confirm-type").oninput = function () { $("#confirm-ok").disabled = $("#confirm-type").value !== typed; };
    return new Promise(function (resolve) {
      d.onclose = function () { resolve(d.returnValue === "ok" && (!typed || $("#confirm-type").value === typed)); };
      d.returnValue = "";
      d.showModal();
      (typed ? $("#confirm-type") : $("#confirm-cancel")).focus();
    });
  }

  // secret shows a value the server shows once (a key, a link) with a copy
  // button and the warning that it will not be shown again.
  function secret(label, value) {
    var out = el("output", { class: "secret-value", text: value });
    var copy = el("button", { type: "button", class: "quiet", onclick: function () {
      (navigator.clipboard ? navigator.clipboard.writeText(value) : Promise.reject()).then(function () { copy.textContent = "Copied"; }, function () {
        var r = document.createRange(); r.selectNodeContents(out); var s = getSelection(); s.removeAllRanges(); s.addRange(r);
      });
    } }, "Copy");
    return el("div", { class: "secret", role: "status" }, [el("p", {}, [el("strong", { text: label }), " — shown this once; copy it now."]), el("div", { class: "secret-row" }, [out, copy])]);
  }

  // table renders rows: cols is [{head, cell(row) -> node or text}].
  function table(cols, rows, empty) {
    if (!rows || !rows.length) return el("p", { class: "empty", text: empty || "None yet." });
    return el("div", { class: "table-wrap" }, el("table", { class: "settings-table" }, [
      el("thead", {}, el("tr", {}, cols.map(function (c) { return el("th", { text: c.head }); }))),
      el("tbody", {}, rows.map(function (r) {
        return el("tr", {}, cols.map(function (c) { return el("td", { "data-head": c.head }, c.cell(r)); }));
      }))]));
  }

  // when shows an API time (RFC 3339, UTC) in the browser's time zone.
  var timeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
  function when(iso) {
    var d = iso ? new Date(iso) : null;
    return d && !isNaN(d) ? el("time", { datetime: iso, title: iso, text: timeFormat.format(d) }) : (iso || "");
  }

  function current() { return workspaces.filter(function (w) { return w.slug === state.ws; })[0] || null; }

  function ctx() {
    var w = current();
    return {
      api: request, authHeaders: authHeaders, el: el, field: field, form: form, confirm: confirm, secret: secret, table: table, when: when,
      status: status, refresh: refresh, reload: show,
      workspace: w ? w.slug : "", workspaceName: w ? w.name : "", role: w ? w.role : "",
      sites: w ? w.sites : [], site: state.site, account: account, token: !!token,
      go: function (page, site) { if (site != null) state.site = site; state.page = page; writeURL(); show(); }
    };
  }

  // allowed: account pages are for a signed-in account (not the token);
  // the others need the page's role in the workspace.
  function allowed(p) {
    if (p.section === "account") return !!account;
    var w = current();
    return w && ROLES[w.role] >= ROLES[p.minRole || "admin"];
  }

  function nav() {
    ["account", "workspace", "site"].forEach(function (section) {
      var ul = $("#nav-" + section);
      ul.textContent = "";
      pages.filter(function (p) { return p.section === section && allowed(p); }).forEach(function (p) {
        var a = el("a", { href: "?" + query(p.id), "aria-current": p.id === state.page ? "page" : null, text: p.title, onclick: function (ev) {
          ev.preventDefault(); state.page = p.id; writeURL(); show();
        } });
        ul.appendChild(el("li", {}, a));
      });
    });
    var sel = $("#settings-site");
    sel.textContent = "";
    var w = current();
    (w ? w.sites : []).forEach(function (s) { sel.appendChild(el("option", { value: s.id }, s.name + " (" + s.id + ")")); });
    sel.value = state.site;
    sel.closest("label").hidden = $("#nav-site").hidden = !(w && w.sites.length);
  }

  function query(page) {
    var q = new URLSearchParams();
    if (state.ws) q.set("ws", state.ws);
    if (state.site) q.set("site", state.site);
    if (page) q.set("page", page);
    return q.toString();
  }
  function writeURL() { history.replaceState(null, "", "?" + query(state.page)); }

  // show renders the picked page (or the first one the role may see).
  function show() {
    var w = current();
    if (w && !w.sites.some(function (s) { return s.id === state.site; })) state.site = w.sites.length ? w.sites[0].id : "";
    var visible = pages.filter(function (p) { return allowed(p) && (p.section !== "site" || state.site); });
    var p = visible.filter(function (x) { return x.id === state.page; })[0] || visible[0];
    state.page = p ? p.id : "";
    writeURL();
    nav();
    var main = $("#settings-page");
    main.textContent = "";
    document.body.removeAttribute("data-page");
    status("");
    if (!p) { main.appendChild(el("p", { class: "empty", text: "Nothing to set here." })); return Promise.resolve(); }
    var box = el("section", { class: "settings-section", id: "page-" + p.id }, [el("h2", { text: p.title + (p.section === "site" && state.site ? " · " + state.site : "") })]);
    main.appendChild(box);
    return Promise.resolve().then(function () { return p.render(box, ctx()); }).catch(function (e) {
      if (e && e.status === 401) return signedOut();
      box.appendChild(el("p", { class: "form-error", role: "alert", text: (e && e.message) || "failed" }));
    }).then(function () {
      // The page is drawn: tests wait for this mark.
      if (main.contains(box)) document.body.setAttribute("data-page", p.id);
    });
  }

  // refresh reads the workspaces and their sites again (after a site is
  // created, renamed or deleted) and shows the page again.
  function refresh() { return loadWorkspaces().then(show); }

  function loadWorkspaces() {
    if (account) {
      return fetch("/v1/auth/session", { headers: { Accept: "application/json" } }).then(function (r) {
        if (!r.ok) throw apiError(r.status, null);
        return r.json();
      }).then(function (a) {
        account = a;
        workspaces = a.workspaces.map(function (w) { return { slug: w.slug, name: w.name, role: w.role, sites: w.sites || [] }; });
      });
    }
    // The admin token lists every workspace and acts as an owner in each.
    return request("/workspaces").then(function (b) {
      return Promise.all(b.workspaces.map(function (w) {
        return request("/workspaces/" + encodeURIComponent(w.slug) + "/sites").then(function (s) {
          return { slug: w.slug, name: w.name, role: "owner", sites: s.sites.map(function (x) { return { id: x.id, name: x.name }; }) };
        });
      }));
    }).then(function (list) { workspaces = list; });
  }

  function signedOut() {
    $("#settings").hidden = true;
    $("#need-signin").hidden = false;
    $("#signout").hidden = true;
  }

  function start() {
    var q = new URLSearchParams(location.search);
    state.ws = q.get("ws") || ""; state.site = q.get("site") || ""; state.page = q.get("page") || "";
    return loadWorkspaces().then(function () {
      $("#signout").hidden = false;
      var admin = workspaces.filter(function (w) { return ROLES[w.role] >= ROLES.admin; });
      if (!admin.length) {
        // A viewer has its own account's page and nothing of the workspaces'.
        $("#need-admin").hidden = false;
        if (!account) return;
        workspaces = [];
        $("#settings-workspace").closest("label").hidden = true;
        $("#settings").hidden = false;
        return show();
      }
      if (!admin.some(function (w) { return w.slug === state.ws; })) state.ws = admin[0].slug;
      var sel = $("#settings-workspace");
      sel.textContent = "";
      admin.forEach(function (w) { sel.appendChild(el("option", { value: w.slug }, w.name + " (" + w.role + ")")); });
      sel.value = state.ws;
      sel.closest("label").hidden = admin.length < 2;
      $("#settings").hidden = false;
      return show();
    }, function (e) {
      // A key without admin cannot list workspaces: it has no settings.
      if (e.status === 401) return signedOut();
      $("#need-admin").hidden = false;
    });
  }

  $("#settings-workspace").onchange = function () { state.ws = this.value; state.site = ""; show(); };
  $("#settings-site").onchange = function () {
    state.site = this.value;
    var p = pages.filter(function (x) { return x.id === state.page; })[0];
    if (!p || p.section !== "site") state.page = "";
    show();
  };
  $("#signout").onclick = function () {
    var done = account ? request("/auth/signout", { method: "POST", body: {} }).catch(function () {}) : Promise.resolve();
    sessionStorage.removeItem("tally_token");
    localStorage.removeItem("tally_account");
    done.then(function () { location.href = "/v1/ui/"; });
  };

  window.TallySettings = {
    // register adds a page; call it from a settings_*.js file.
    register: function (p) { pages.push(p); }
  };

  document.addEventListener("DOMContentLoaded", function () {
    if (token) { start(); return; }
    fetch("/v1/auth/session", { headers: { Accept: "application/json" } }).then(function (r) {
      return r.ok ? r.json() : null;
    }).then(function (a) {
      if (!a) return signedOut();
      account = a;
      return start();
    }, signedOut);
  });
})();
