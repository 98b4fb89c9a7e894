/* Tally's stand-in for Plausible's scripts (docs/intake.md#plausibles-snippet), written for
   Tally: the legacy /js/script[.<ext>...].js, whose extensions the collector sets in X, and
   the 2025 /js/pa-<id>.js (X.web, X.d the site), which starts at plausible.init({...}). It
   posts Plausible's event body, engagement included, and never throws into the page. */
(function (w, d, X) {
  try {
    // compat finds its tag by id="plausible", for browsers without
    // document.currentScript (Plausible's script.compat.js).
    var s = X.compat ? d.getElementById("plausible") : d.currentScript, l = w.location, stub = w.plausible, q = (stub && stub.q) || [], c;
    if (!s || (stub && stub.l)) return;
    var attr = function (n) { return s.getAttribute(n); };
    var files = "pdf,xlsx,docx,txt,rtf,csv,exe,key,pps,ppt,pptx,7z,pkg,rar,gz,zip,avi,mov,mp4,mpeg,wmv,midi,mp3,wav,wma,dmg".split(",");
    var glob = function (a) {
      return (a || "").split(",").filter(function (p) { return p.trim(); }).map(function (p) {
        return new RegExp("^" + p.trim().replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*\*/g, "\0").replace(/\*/g, "[^\\s/]*").replace(/\0/g, ".*") + "/?$");
      });
    };
    var inc = glob(attr("data-include")), exc = glob(attr("data-exclude"));
    // XMLHttpRequest where there is no fetch (the browsers compat is for).
    var post = function (b, cb) {
      var j = JSON.stringify(b), t = "text/plain", r;
      if (w.fetch) fetch(c.api, { method: "POST", keepalive: true, body: j, headers: { "Content-Type": t } })
        .then(function (r) { if (cb) cb({ status: r.status }); }, function (e) { if (cb) cb({ error: e }); });
      else {
        r = new XMLHttpRequest();
        r.open("POST", c.api);
        r.setRequestHeader("Content-Type", t);
        r.onload = function () { if (cb) cb({ status: r.status }); };
        r.send(j);
      }
    };

    // Engagement: the page's deepest scroll and the time it was visible and
    // focused, sent when it is hidden or left, or before the next SPA pageview.
    var eu, ep, ign = 1, sent = -1, run = 0, acc = 0, deep = 0, on;
    var height = function () {
      var b = d.body || {}, e = d.documentElement || {};
      return Math.max(b.scrollHeight || 0, b.offsetHeight || 0, e.scrollHeight || 0, e.offsetHeight || 0, e.clientHeight || 0);
    };
    var depth = function () { var h = height(), v = w.innerHeight || 0; return h <= v ? h : (w.scrollY || 0) + v; };
    var engaged = function () { return acc + (run ? Date.now() - run : 0); };
    var engage = function () {
      var e = engaged();
      if (ign || !(sent < deep || e >= 3000)) return;
      sent = deep;
      var b = { n: "engagement", sd: Math.min(100, Math.round(deep / (height() || 1) * 100)), d: c.d, u: eu, p: ep, e: e };
      if (c.hash) b.h = 1;
      run = acc = 0;
      post(b);
    };
    var vis = function () {
      if (d.visibilityState == "visible" && d.hasFocus() && !run) run = Date.now();
      else if (d.visibilityState == "hidden" || !d.hasFocus()) { acc = engaged(); run = 0; engage(); }
    };

    var track = function (name, o) {
      try {
        o = o || {};
        // An ignored event: Plausible's warning (unless logging: false),
        // and the callback called with nothing.
        var pv = name == "pageview", p = o.props, k, a, done = function (why) {
          if (why && c.log) console.warn("Ignoring Event: " + why);
          if (pv) ign = 1;
          if (o.callback) o.callback();
        };
        if (pv && on) { engage(); deep = depth(); }
        if (!c.local && (/^localhost$|^127(\.\d+){0,2}\.\d+$|^\[::1?\]$/.test(l.hostname) || l.protocol == "file:")) return done("localhost");
        if ((w._phantom || w.__nightmare || w.navigator.webdriver || w.Cypress) && !w.__plausible) return done();
        try { if (localStorage.plausible_ignore == "true") return done("localStorage flag"); } catch (e) {}
        var path = l.pathname + (c.hash ? l.hash : ""), hit = function (r) { return r.test(path); };
        if (pv && c.excl && (inc.length && !inc.some(hit) || exc.some(hit))) return done("exclusion rule");
        var b = { n: name, u: o.u || o.url || l.href, d: c.d, r: d.referrer || null };
        if (c.pvprops) {
          p = p || {};
          for (k = 0; k < s.attributes.length; k++) {
            a = s.attributes[k];
            if (a.name.indexOf("event-") == 0 && !p[a.name.slice(6)]) p[a.name.slice(6)] = a.value;
          }
        }
        a = c.props;
        if (typeof a == "function") a = a(name);
        if (a && typeof a == "object") p = Object.assign({}, a, p);
        if (p) b.p = p;
        if (o.revenue) b.$ = o.revenue;
        if (o.interactive === false) b.i = false;
        if (c.hash) b.h = 1;
        if (typeof c.tr == "function" && !(b = c.tr(b))) return done("transformRequest");
        if (pv) {
          ign = 0; eu = b.u; ep = b.p; sent = -1; acc = 0; run = Date.now();
          if (!on) { on = 1; d.addEventListener("visibilitychange", vis); w.addEventListener("blur", vis); w.addEventListener("focus", vis); }
        }
        post(b, o.callback);
      } catch (e) {}
    };

    // Clicks: outbound links, file downloads and tagged elements (up to
    // three parents up, not inside a form); tagged forms on submit.
    var tagged = function (el) { return el && el.getAttribute && /(^|\s)plausible-event-name(=|--)/.test(el.getAttribute("class")); };
    var tags = function (el) {
      var a = { props: {}, revenue: {} }, cls = (el.getAttribute("class") || "").split(/\s+/), i, m;
      for (i = 0; i < cls.length; i++) {
        if ((m = /^plausible-event-(.+?)(=|--)(.+)$/.exec(cls[i]))) {
          if (m[1].toLowerCase() == "name") a.name = m[3].replace(/\+/g, " ");
          else a.props[m[1]] = m[3].replace(/\+/g, " ");
        } else if ((m = /^plausible-revenue-(.+?)(=|--)(.+)$/.exec(cls[i]))) a.revenue[m[1]] = m[3];
      }
      if (!a.revenue.amount) delete a.revenue;
      return a;
    };
    var click = function (e) {
      if (e.type == "auxclick" && e.button != 1) return;
      var t = e.target, link, el, i, a;
      for (i = 0; t && i <= 3; i++, t = t.parentNode) {
        if (t.tagName == "FORM") { el = 0; break; }
        if (t.tagName == "A" && !link) link = t;
        if (c.tags && tagged(t)) el = el || t;
      }
      if (el) {
        a = tags(el);
        if (link) a.props.url = link.href;
        return track(a.name, a);
      }
      for (t = e.target; t && !(t.tagName == "A" && t.href); ) t = t.parentNode;
      if (!t || (c.tags && tagged(t))) return;
      var u = t.href.split("?")[0];
      if (c.out && t.host && t.host != l.host) track("Outbound Link: Click", { props: { url: t.href } });
      else if (c.dl && files.indexOf(u.split(".").pop()) >= 0) track("File Download", { props: { url: u } });
    };
    var submit = function (e) {
      var f = e.target, a;
      if (!f || f.tagName != "FORM") return;
      if (c.tags && tagged(f)) { a = tags(f); return track(a.name, a); }
      if (c.forms && (f.hasAttribute("novalidate") || f.checkValidity())) track("Form: Submission");
    };

    var start = function (o) {
      if (c) return;
      o = o || {};
      var api = s.src.split("/").slice(0, 3).join("/") + "/api/event", fd = o.fileDownloads;
      c = X.web
        ? { d: X.d, api: o.endpoint || api, hash: o.hashBasedRouting, manual: o.autoCapturePageviews === false, local: o.captureOnLocalhost,
            out: o.outboundLinks !== false, dl: fd !== false, forms: o.formSubmissions !== false, tags: 1, props: o.customProperties, tr: o.transformRequest,
            log: o.logging !== false }
        : { d: attr("data-domain"), api: attr("data-api") || api, hash: X.hash, manual: X.manual, local: X.local, out: X["outbound-links"],
            dl: X["file-downloads"], tags: X["tagged-events"], pvprops: X["pageview-props"], excl: X.exclusions, log: 1 };
      if (fd && fd.fileExtensions) files = fd.fileExtensions;
      if (attr("file-types")) files = attr("file-types").split(",");
      if (attr("add-file-types")) files = attr("add-file-types").split(",").concat(files);
      w.plausible = track;
      track.init = start;
      track.l = true;
      deep = depth();
      d.addEventListener("scroll", function () { var p = depth(); if (p > deep) deep = p; });
      if (!c.manual) {
        var last, page = function (spa) {
          if (!c.hash && spa && last === l.pathname) return;
          last = l.pathname;
          track("pageview");
        };
        if (c.hash) w.addEventListener("hashchange", function () { page(1); });
        else if (w.history.pushState) {
          var h = w.history, push = h.pushState;
          h.pushState = function () { var r = push.apply(this, arguments); page(1); return r; };
          w.addEventListener("popstate", function () { page(1); });
        }
        if (d.visibilityState == "hidden" || d.visibilityState == "prerender") {
          d.addEventListener("visibilitychange", function () { if (!last && d.visibilityState == "visible") page(); });
        } else page();
        w.addEventListener("pageshow", function (e) { if (e.persisted) page(); });
      }
      if (c.out || c.dl || c.tags) { d.addEventListener("click", click); d.addEventListener("auxclick", click); }
      if (c.forms || c.tags) d.addEventListener("submit", submit, true);
      for (var i = 0; i < q.length; i++) track.apply(null, q[i]);
    };
    if (!X.web) start();
    else if (stub && stub.o) start(stub.o);
    else {
      // Loaded before the page's plausible.init(): queue until it comes.
      w.plausible = function () { q.push(arguments); };
      w.plausible.init = start;
    }
  } catch (e) {}
})(window, document, TALLY_CONFIG);
