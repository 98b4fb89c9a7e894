/* Tally's stand-in for Umami's tracker (docs/intake.md#umamis-snippet), written for Tally:
   the script tag's data-website-id, data-host-url (default: this script's folder),
   data-auto-track, data-domains, data-tag, data-exclude-search and data-do-not-track;
   window.umami.track and identify; data-umami-event elements. It posts Umami's
   {type, payload} to /api/send and never throws into the page. */
(function (w, d) {
  try {
    var s = d.currentScript, l = w.location, n = w.navigator, h = w.history;
    if (!s) return;
    var attr = function (a) { return s.getAttribute("data-" + a); };
    var host = attr("host-url"), domains = attr("domains"), tag = attr("tag");
    var api = (host ? host.replace(/\/$/, "") : s.src.split("/").slice(0, -1).join("/")) + "/api/send";
    var path = function () { return l.pathname + (attr("exclude-search") == "true" ? "" : l.search); };
    var cur = path(), ref = d.referrer, cache;
    var off = function () {
      try { if (localStorage.getItem("umami.disabled")) return true; } catch (e) {}
      if (domains && domains.split(",").map(function (x) { return x.trim(); }).indexOf(l.hostname) < 0) return true;
      return attr("do-not-track") == "true" && (n.doNotTrack == "1" || w.doNotTrack == "1");
    };
    var payload = function () {
      var p = { website: attr("website-id"), hostname: l.hostname, screen: screen.width + "x" + screen.height, language: n.language,
        title: d.title, url: encodeURI(cur), referrer: encodeURI(ref) };
      if (tag) p.tag = tag;
      return p;
    };
    // The answer is Umami's session token, sent back in x-umami-cache.
    var send = function (p, type) {
      if (off()) return Promise.resolve();
      var hd = { "Content-Type": "application/json" };
      if (cache) hd["x-umami-cache"] = cache;
      return fetch(api, { method: "POST", body: JSON.stringify({ type: type || "event", payload: p }), headers: hd })
        .then(function (r) { return r.text(); })
        .then(function (t) { cache = t; return t; }, function () {});
    };
    var track = function (a, data) {
      try {
        var p = payload();
        if (typeof a == "string") {
          p.name = a;
          if (data && typeof data == "object") p.data = data;
        } else if (typeof a == "function") p = a(p);
        else if (a && typeof a == "object") p = Object.assign(p, a);
        return p ? send(p) : Promise.resolve();
      } catch (e) { return Promise.resolve(); }
    };
    var identify = function (id, data) {
      var p = payload();
      if (typeof id == "string") p.id = id;
      else data = id;
      if (data && typeof data == "object") p.data = data;
      return send(p, "identify");
    };
    if (!w.umami) w.umami = { track: track, identify: identify };
    if (attr("auto-track") == "false" || off()) return;

    // SPA navigations: a pageview 300 ms after the URL changed, once the
    // page has had time to set its title.
    ["pushState", "replaceState"].forEach(function (m) {
      var orig = h[m];
      h[m] = function (st, t, u) {
        var r = orig.apply(this, arguments), now = path();
        if (u && now != cur) { ref = cur; cur = now; setTimeout(track, 300); }
        return r;
      };
    });
    // A click on an element with data-umami-event (or inside one, ten
    // levels up): an event of that name with its data-umami-event-* as
    // data. A link goes on once the event is sent, unless it opens elsewhere.
    d.addEventListener("click", function (e) {
      var el = e.target, i, a, data = {}, name, m;
      for (i = 0; el && el.getAttribute && i <= 10; i++, el = el.parentElement) if ((name = el.getAttribute("data-umami-event"))) break;
      if (!name) return;
      for (i = 0; i < el.attributes.length; i++) {
        a = el.attributes[i];
        if ((m = /^data-umami-event-([\w-]+)$/.exec(a.name))) data[m[1]] = a.value;
      }
      if (el.tagName == "A" && el.href && !(el.target == "_blank" || e.ctrlKey || e.shiftKey || e.metaKey || e.button == 1)) {
        e.preventDefault();
        track(name, data).then(function () { l.href = el.href; });
      } else track(name, data);
    }, true);
    var started, init = function () {
      if (d.readyState == "complete" && !started) { started = 1; track(); }
    };
    d.addEventListener("readystatechange", init, true);
    init();
  } catch (e) {}
})(window, document);
