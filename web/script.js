/* Tally tracking script. <script defer src="https://collector/v1/script.js" data-site="SITE_ID"></script>
   Until the page grants consent it stores and reads nothing on the device and sends consent "denied".
   tally.consent(true) (or data-consent="granted") keeps an id in localStorage from then on;
   tally.consent(false) deletes it. data-cookieless, Do-Not-Track and Global Privacy Control keep it
   cookieless whatever the page grants. data-name renames the global (default "tally"). It never throws
   into the page. */
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
    // granted: the page said the visitor consents; only then is storage touched.
    var granted = false, anon = uuid(), user = null, last;
    var consent = function (yes) {
      try {
        granted = !!yes && !off;
        var ls = localStorage;
        if (granted) {
          anon = ls.getItem("tally_aid") || anon; ls.setItem("tally_aid", anon);
          user = ls.getItem("tally_uid");
        } else {
          anon = uuid(); user = null;
          ls.removeItem("tally_aid"); ls.removeItem("tally_uid");
        }
      } catch (e) {}
    };
    if (s.getAttribute("data-consent") == "granted") consent(true);
    var send = function (type, props, extra) {
      try {
        var e = { id: uuid(), site_id: site, anon_id: anon, type: String(type), ts: new Date().toISOString(), url: location.href,
          consent: granted ? "granted" : "denied" };
        if (d.referrer) e.referrer = d.referrer;
        if (props && typeof props == "object") e.properties = props;
        if (granted && user) e.user_id = user;
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
          if (!granted || !id) return;
          user = String(id); localStorage.setItem("tally_uid", user);
        } catch (e) {}
        send("identify", null, traits && typeof traits == "object" ? { traits: traits } : {});
      },
      consent: consent
    };
    page();
  } catch (e) {}
})(window, document);
