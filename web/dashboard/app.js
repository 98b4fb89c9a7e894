// Tally dashboard: reads only the query API, so its numbers are the API's.
(function () {
  "use strict";
  var $ = function (s) { return document.querySelector(s); };
  var token = sessionStorage.getItem("tally_token");
  var admin = false;

  function status(msg) { $("#status").textContent = msg || ""; }

  function api(path, opts) {
    opts = opts || {};
    opts.headers = { Authorization: "Bearer " + token, "Content-Type": "application/json" };
    return fetch("/v1" + path, opts).then(function (r) {
      if (r.status === 204) return null;
      return r.json().catch(function () { return null; }).then(function (body) {
        if (!r.ok) {
          var e = new Error((body && body.error && body.error.message) || "HTTP " + r.status);
          e.status = r.status;
          throw e;
        }
        return body;
      });
    });
  }

  function cell(row, text, cls) {
    var td = document.createElement("td");
    td.textContent = text == null ? "(none)" : String(text);
    if (cls) td.className = cls;
    row.appendChild(td);
    return td;
  }

  // fill replaces a table's rows; data is never parsed as HTML.
  function fill(table, head, rows, render) {
    table.textContent = "";
    var tr = document.createElement("tr");
    head.forEach(function (h) { var th = document.createElement("th"); th.textContent = h; tr.appendChild(th); });
    table.appendChild(tr);
    if (!rows.length) {
      var r = document.createElement("tr");
      var td = cell(r, "Nothing here", "empty");
      td.colSpan = head.length;
      table.appendChild(r);
    }
    rows.forEach(function (x) { var r = document.createElement("tr"); render(r, x); table.appendChild(r); });
  }

  function chart(days) {
    var el = $("#chart"), ns = "http://www.w3.org/2000/svg";
    el.textContent = "";
    var svg = document.createElementNS(ns, "svg");
    var w = Math.max(days.length, 1) * 10, h = 100;
    svg.setAttribute("viewBox", "0 0 " + w + " " + h);
    svg.setAttribute("preserveAspectRatio", "none");
    var max = Math.max.apply(null, days.map(function (d) { return d.count; }).concat([1]));
    days.forEach(function (d, i) {
      var bh = d.count / max * (h - 2);
      var rect = document.createElementNS(ns, "rect");
      rect.setAttribute("x", i * 10 + 1); rect.setAttribute("width", 8);
      rect.setAttribute("y", h - bh); rect.setAttribute("height", bh);
      var title = document.createElementNS(ns, "title");
      title.textContent = d.date + ": " + d.count;
      rect.appendChild(title);
      svg.appendChild(rect);
    });
    el.appendChild(svg);
  }

  function site() { return admin ? $("#site-select").value : $("#site-input").value.trim(); }

  function range() { return "from=" + $("#from").value + "&to=" + $("#to").value; }

  function load() {
    var id = site();
    if (!id) { status("Pick a site."); return Promise.resolve(); }
    status("Loading…");
    var base = "/sites/" + encodeURIComponent(id);
    var jobs = [
      api(base + "/pageviews?" + range()).then(function (p) {
        $("#pageviews-total").textContent = p.count;
        chart(p.by_day);
      }),
      api(base + "/sessions?" + range()).then(function (s) {
        $("#sessions-count").textContent = s.count;
        $("#sessions-duration").textContent = Math.round(s.avg_duration_s) + " s";
        $("#sessions-events").textContent = s.avg_events.toFixed(1);
        $("#sessions-bounce").textContent = Math.round(s.bounce_rate * 100) + " %";
      }),
      api(base + "/events?" + range()).then(function (e) {
        fill($("#events"), ["Event", "Count"], e.by_name, function (r, x) { cell(r, x.name); cell(r, x.count, "n"); });
      })
    ];
    ["url", "referrer", "country", "browser", "os", "device_type"].forEach(function (dim) {
      jobs.push(api(base + "/breakdown?dimension=" + dim + "&limit=10&" + range()).then(function (b) {
        fill($("#bd-" + dim), ["Value", "Pageviews"], b.rows, function (r, x) { cell(r, x.value); cell(r, x.count, "n"); });
      }));
    });
    jobs.push(loadAdmin(base));
    return Promise.all(jobs).then(function () { status(""); }, function (e) { status(e.message); });
  }

  function loadAdmin(base) {
    var slug = admin ? $("#workspace").value : (token.indexOf("sk_") === 0 ? token.slice(3, token.length - 33) : "");
    return Promise.all([api(base + "/dlq?limit=50"), slug ? api("/workspaces/" + encodeURIComponent(slug) + "/audit?limit=50") : null])
      .then(function (res) {
        $("#admin").hidden = false;
        fill($("#dlq"), ["Received", "Event", "Errors", ""], res[0].events, function (r, x) {
          cell(r, x.received_at);
          cell(r, (x.payload && x.payload.type) || x.id);
          cell(r, (x.error || []).map(function (e) { return e.path + " " + e.message; }).join("; "));
          var b = document.createElement("button");
          b.textContent = "Replay";
          b.onclick = function () {
            api(base + "/dlq/" + encodeURIComponent(x.id) + "/replay", { method: "POST" })
              .then(function () { status("Replayed " + x.id); return load(); }, function (e) { status(e.message); });
          };
          r.appendChild(document.createElement("td")).appendChild(b);
        });
        fill($("#audit"), ["Time", "Action", "Actor", "Target"], res[1] ? res[1].entries : [], function (r, x) {
          cell(r, x.ts); cell(r, x.action); cell(r, x.actor_kind + (x.actor_id ? " " + x.actor_id.slice(0, 8) : "")); cell(r, x.target);
        });
      }, function (e) {
        if (e.status === 403 || e.status === 401) { $("#admin").hidden = true; return; }
        throw e;
      });
  }

  function sites() {
    return api("/workspaces/" + encodeURIComponent($("#workspace").value) + "/sites").then(function (s) {
      var sel = $("#site-select");
      sel.textContent = "";
      s.sites.forEach(function (x) { var o = document.createElement("option"); o.value = x.id; o.textContent = x.name + " (" + x.id + ")"; sel.appendChild(o); });
    });
  }

  function start() {
    $("#signin").hidden = true; $("#app").hidden = false; $("#signout").hidden = false;
    var to = new Date(), from = new Date(Date.now() - 29 * 864e5);
    if (!$("#to").value) $("#to").value = to.toISOString().slice(0, 10);
    if (!$("#from").value) $("#from").value = from.toISOString().slice(0, 10);
    return api("/workspaces").then(function (w) {
      admin = true;
      $("#ws-label").hidden = false; $("#site-select-label").hidden = false;
      var sel = $("#workspace");
      sel.textContent = "";
      w.workspaces.forEach(function (x) { var o = document.createElement("option"); o.value = x.slug; o.textContent = x.name; sel.appendChild(o); });
      return sites().then(load);
    }, function (e) {
      if (e.status === 401) { signout(); status("That token was not accepted."); return; }
      admin = false;
      $("#site-input-label").hidden = false;
      status("Enter the site id to show.");
    });
  }

  function signout() {
    sessionStorage.removeItem("tally_token");
    token = null;
    $("#app").hidden = true; $("#signout").hidden = true; $("#signin").hidden = false;
  }

  $("#signin").onsubmit = function (ev) {
    ev.preventDefault();
    token = $("#token").value.trim();
    sessionStorage.setItem("tally_token", token);
    status("");
    start();
  };
  $("#pick").onsubmit = function (ev) { ev.preventDefault(); load(); };
  $("#workspace").onchange = function () { sites().then(load); };
  $("#signout").onclick = signout;
  $("#timeline-form").onsubmit = function (ev) {
    ev.preventDefault();
    var path = "/sites/" + encodeURIComponent(site()) + "/users/" + encodeURIComponent($("#user-id").value.trim()) + "/timeline?limit=100";
    api(path).then(function (t) {
      status("");
      fill($("#timeline"), ["Time", "Event", "URL", "Device"], t.events, function (r, x) {
        cell(r, x.ts); cell(r, x.type); cell(r, x.url); cell(r, [x.browser, x.os, x.device_type].filter(Boolean).join(", "));
      });
    }, function (e) { status(e.message); });
  };

  if (token) start(); else $("#signin").hidden = false;
})();
