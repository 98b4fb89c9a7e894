/* Tally tracking script. <script defer src="https://collector/v1/script.js" data-site="SITE_ID"></script>
   Options: data-cookieless (no storage, consent "denied"), data-name (global name, default "tally").
   Do-Not-Track and Global Privacy Control also make it cookieless. It never throws into the page. */
(function (w, d) {
  try {
    var s = d.currentScript || d.querySelector("script[data-site]");
    if (!s) return;
    var site = s.getAttribute("data-site"), n = w.navigator || {};
    var api = new URL(s.src, location.href).origin + "/v1/events";
    var off = s.hasAttribute("data-cookieless") || n.doNotTrack == "1" || w.doNotTrack == "1" || n.globalPrivacyControl === true;
    var uuid = function () {
      if (w.crypto && crypto.randomUUID) return crypto.randomUUID();
      return "10000000-1000-4000-8000-100000000000".replace(/[018]/g, function (c) {
        return (c ^ (Math.random() * 16) >> (c / 4)).toString(16);
      });
    };
    var get = function (k) { try { return off ? null : localStorage.getItem(k); } catch (e) { return null; } };
    var put = function (k, v) { try { if (!off) localStorage.setItem(k, v); } catch (e) {} };
    var anon = get("tally_aid");
    if (!anon) { anon = uuid(); put("tally_aid", anon); }
    var user = get("tally_uid"), last;
    var send = function (type, props, extra) {
      try {
        var e = { id: uuid(), site_id: site, anon_id: anon, type: String(type), ts: new Date().toISOString(), url: location.href };
        if (d.referrer) e.referrer = d.referrer;
        if (props && typeof props == "object") e.properties = props;
        if (off) e.consent = "denied"; else if (user) e.user_id = user;
        for (var k in extra || {}) e[k] = extra[k];
        fetch(api, { method: "POST", keepalive: true, body: JSON.stringify(e),
          headers: { "Content-Type": "application/json", Authorization: "Bearer " + site } })["catch"](function () {});
      } catch (err) {}
    };
    var page = function () {
      if (location.href !== last) { last = location.href; send("pageview"); }
    };
    ["pushState", "replaceState"].forEach(function (m) {
      var orig = history[m];
      if (orig) history[m] = function () {
        var r = orig.apply(this, arguments);
        try { page(); } catch (e) {}
        return r;
      };
    });
    w.addEventListener("popstate", page);
    w.addEventListener("hashchange", page);
    w[s.getAttribute("data-name") || "tally"] = {
      track: function (type, props) { send(type, props); },
      identify: function (id, traits) {
        try {
          if (off || !id) return;
          user = String(id); put("tally_uid", user);
          send("identify", null, traits && typeof traits == "object" ? { traits: traits } : {});
        } catch (e) {}
      }
    };
    page();
  } catch (e) {}
})(window, document);
