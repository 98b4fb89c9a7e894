/* Tally's stand-in for Plausible's legacy script (docs/intake.md#plausibles-snippet).
   The collector sets X to the extensions the file's name lists. It posts Plausible's
   event body to data-api (default: this script's origin + /api/event), never throwing. */
(function (w, d, X) {
  try {
    var s = d.currentScript, l = w.location;
    if (!s) return;
    var api = s.getAttribute("data-api") || new URL(s.src, l.href).origin + "/api/event";
    var dom = s.getAttribute("data-domain");
    var glob = function (a) {
      return (a || "").split(",").filter(Boolean).map(function (p) {
        return new RegExp("^" + p.trim().replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*\*/g, "\u0000").replace(/\*/g, "[^/]*").replace(/\u0000/g, ".*") + "/?$");
      });
    };
    var inc = glob(s.getAttribute("data-include")), exc = glob(s.getAttribute("data-exclude"));
    var q = (w.plausible && w.plausible.q) || [];
    var send = function (name, o) {
      try {
        o = o || {};
        var cb = o.callback, done = function () { if (cb) cb(); };
        if (!X.local && (/^localhost$|^127(\.\d+){3}$|^\[::1\]$/.test(l.hostname) || l.protocol == "file:")) return done();
        if (w._phantom || w.__nightmare || w.navigator.webdriver || w.Cypress) return done();
        try { if (localStorage.plausible_ignore == "true") return done(); } catch (e) {}
        if (X.exclusions) {
          var path = l.pathname, hit = function (r) { return r.test(path); };
          if (inc.length && !inc.some(hit) || exc.some(hit)) return done();
        }
        var b = { n: name, u: o.u || l.href, d: dom, r: d.referrer || null };
        if (o.props) b.p = o.props;
        if (o.revenue) b.$ = o.revenue;
        if (X.hash) b.h = 1;
        fetch(api, { method: "POST", keepalive: true, body: JSON.stringify(b), headers: { "Content-Type": "text/plain" } })
          .then(done, done);
      } catch (e) {}
    };
    var last;
    var page = function (o) {
      if (!X.hash && last === l.pathname) return;
      last = l.pathname;
      o = o || {};
      if (X["pageview-props"] && !o.props) {
        var p = {}, a = s.attributes, i;
        for (i = 0; i < a.length; i++) if (a[i].name.indexOf("event-") == 0) p[a[i].name.slice(6)] = a[i].value;
        o.props = p;
      }
      send("pageview", o);
    };
    w.plausible = function (name, o) {
      if (name == "pageview") { last = null; page(o); } else send(name, o);
    };
    if (!X.manual) {
      var h = w.history;
      if (h.pushState) {
        var push = h.pushState;
        h.pushState = function () { var r = push.apply(this, arguments); page(); return r; };
        w.addEventListener("popstate", function () { page(); });
      }
      if (X.hash) w.addEventListener("hashchange", function () { page(); });
      if (d.visibilityState == "prerender") {
        d.addEventListener("visibilitychange", function v() { if (!last && d.visibilityState == "visible") { page(); d.removeEventListener("visibilitychange", v); } });
      } else page();
    }
    var files = /\.(pdf|xlsx?|docx?|txt|rtf|csv|exe|key|pp[st]|odp|mp3|wav|wma|ogg|flac|aac|mp4|mov|avi|wmv|mkv|zip|rar|7z|gz|dmg|iso|msi|apk)$/i;
    var click = function (e) {
      if (e.type == "auxclick" && e.button != 1) return;
      var a = e.target;
      while (a && !(a.tagName == "A" && a.href)) a = a.parentNode;
      if (a) {
        var u = new URL(a.href, l.href);
        if (X["outbound-links"] && u.host && u.host != l.host) send("Outbound Link: Click", { props: { url: a.href } });
        else if (X["file-downloads"] && files.test(u.pathname)) send("File Download", { props: { url: a.href } });
      }
      if (X["tagged-events"]) {
        var t = e.target;
        while (t && t.getAttribute) {
          var cls = typeof t.className == "string" ? t.className : "", m = /(?:^|\s)plausible-event-name=(\S+)/.exec(cls);
          if (m) {
            var props = {}, c = cls.split(/\s+/), j;
            for (j = 0; j < c.length; j++) {
              var kv = /^plausible-event-(.+)=(.+)$/.exec(c[j]);
              if (kv && kv[1] != "name") props[kv[1]] = kv[2].replace(/\+/g, " ");
            }
            send(m[1].replace(/\+/g, " "), { props: props });
            break;
          }
          t = t.parentNode;
        }
      }
    };
    if (X["outbound-links"] || X["file-downloads"] || X["tagged-events"]) {
      d.addEventListener("click", click);
      d.addEventListener("auxclick", click);
    }
    for (var i = 0; i < q.length; i++) w.plausible.apply(this, q[i]);
  } catch (e) {}
})(window, document, TALLY_EXTENSIONS);
