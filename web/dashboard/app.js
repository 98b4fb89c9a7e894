// Tally dashboard: reads only the query API, so its numbers are the API's
// (docs/dashboard.md). The view (site, range, filters, property, funnel
// steps) lives in the URL's query string; the token never does.
(function () {
  "use strict";
  var $ = function (s) { return document.querySelector(s); };
  var token = sessionStorage.getItem("tally_token");
  // A signed-in account (docs/accounts.md): GET /v1/auth/session's answer,
  // whose CSRF token goes with every request; the session itself is an
  // HttpOnly cookie this script never sees.
  var account = null;
  // A shared link (docs/sharing.md): the page at /share/<token> shows its
  // one site, read-only, and sends the token with every request; a
  // password, once given, is an HttpOnly cookie of that link.
  var shareMatch = /^\/share\/([A-Za-z0-9_-]+)$/.exec(location.pathname);
  var shareToken = shareMatch ? shareMatch[1] : null;
  var admin = false;
  var gen = 0; // the current load; answers of an older one are dropped
  var realtimeTimer = null;
  var goalList = null; // null: goals unavailable (the endpoint answers 404)
  var segmentList = null; // the site's saved segments once asked for; null: not yet (or unavailable)
  var lastFunnel = null; // the funnel shown, for its CSV

  var refreshTimer = null; // the realtime view's next refresh
  var worldMap = null; // the promise of world.json, fetched once

  var state = { ws: "", site: "", period: "30d", from: "", to: "", filters: [], prop: "", steps: [], metric: "", interval: "" };

  // Every panel is one query: by its shown tab's dimension, with visitors
  // and the tab's second metric. The panels and tabs are Plausible's, so a
  // first load asks for five breakdowns, not one per report
  // (docs/dashboard.md#first-load); a tab is asked for when shown. A tab
  // marked optional shows "No data" where the query API refuses its
  // dimension (one another release adds).
  var PANELS = [
    { id: "sources", title: "Top Sources", second: "visits", tabs: [
      { label: "Sources", head: "Source", dim: "visit:source" }, { label: "Channels", head: "Channel", dim: "visit:channel", optional: true },
      { label: "Mediums", head: "UTM medium", dim: "visit:utm_medium" }, { label: "Campaigns", head: "UTM campaign", dim: "visit:utm_campaign" }] },
    { id: "pages", title: "Top Pages", tabs: [
      { label: "Top Pages", head: "Page", dim: "event:page", second: "pageviews" },
      { label: "Entry Pages", head: "Entry page", dim: "visit:entry_page", second: "visits" },
      { label: "Exit Pages", head: "Exit page", dim: "visit:exit_page", second: "visits" }] },
    // Locations: the map and the countries tab are one query by code; a
    // region or city tab shows the name and filters by the code
    // (docs/dashboard.md#locations).
    { id: "locations", title: "Locations", second: "percentage", tabs: [
      { label: "Map", head: "Country", dim: "visit:country", map: true }, { label: "Countries", head: "Country", dim: "visit:country" },
      { label: "Regions", head: "Region", dim: "visit:region", dims: ["visit:region", "visit:region_name"], optional: true },
      { label: "Cities", head: "City", dim: "visit:city", dims: ["visit:city", "visit:city_name"], alt: ["visit:city"], optional: true }] },
    { id: "devices", title: "Devices", second: "percentage", tabs: [
      { label: "Browser", head: "Browser", dim: "visit:browser" }, { label: "OS", head: "Operating system", dim: "visit:os" },
      { label: "Size", head: "Device", dim: "visit:device" }] },
    { id: "props", title: "Custom Properties", tabs: [{ label: "Value", dim: "" }], second: "events" }
  ];
  var tabOf = {};

  var NAMES = {
    "visit:source": "Source", "visit:utm_source": "UTM source", "visit:utm_medium": "UTM medium",
    "visit:utm_campaign": "UTM campaign", "event:page": "Page", "visit:entry_page": "Entry page",
    "visit:exit_page": "Exit page", "visit:country": "Country", "visit:region": "Region", "visit:city": "City", "visit:device": "Device",
    "visit:browser": "Browser", "visit:os": "OS", "event:goal": "Goal"
  };
  var METRIC_LABEL = { visitors: "Visitors", visits: "Visits", pageviews: "Pageviews", events: "Events", percentage: "%", conversion_rate: "CR" };
  // The top stats, as Plausible shows them: each card is a metric of one
  // query (all: the query leaves the goal filter out); clicking one graphs
  // it. A goal filter shows conversions, the realtime view the last 30
  // minutes (docs/dashboard.md#top-stats).
  var HEADLINE = [
    { k: "visitors", m: "visitors", label: "Unique visitors", unit: "visitors" }, { k: "visits", m: "visits", label: "Total visits", unit: "visits" },
    { k: "pageviews", m: "pageviews", label: "Total pageviews", unit: "pageviews" }, { k: "views_per_visit", m: "views_per_visit", label: "Views per visit", unit: "views per visit" },
    { k: "bounce_rate", m: "bounce_rate", label: "Bounce rate", unit: "bounce rate" }, { k: "visit_duration", m: "visit_duration", label: "Visit duration", unit: "visit duration" }
  ];
  var GOAL_HEADLINE = [
    { k: "visitors", m: "visitors", all: true, label: "Unique visitors", unit: "visitors" },
    { k: "conversions", m: "visitors", label: "Unique conversions", unit: "unique conversions", first: true },
    { k: "events", m: "events", label: "Total conversions", unit: "total conversions" },
    { k: "conversion_rate", m: "conversion_rate", label: "Conversion rate", unit: "conversion rate" }
  ];
  var REALTIME_HEADLINE = [
    { k: "current", m: "", label: "Current visitors" },
    { k: "visitors", m: "visitors", label: "Unique visitors (last 30 min)", graph: "Unique visitors", unit: "visitors" },
    { k: "pageviews", m: "pageviews", label: "Pageviews (last 30 min)", graph: "Pageviews", unit: "pageviews" }
  ];
  function goalFiltered() { return state.filters.some(function (f) { return f[0] === "event:goal"; }); }
  function cardList() { return state.period === "realtime" ? REALTIME_HEADLINE : goalFiltered() ? GOAL_HEADLINE : HEADLINE; }
  // chartCard is the card the graph shows: the URL's metric, else the first.
  function chartCard() {
    var list = cardList().filter(function (c) { return c.m; });
    return list.filter(function (c) { return c.k === state.metric; })[0] || list.filter(function (c) { return c.first; })[0] || list[0];
  }
  var INTERVAL_LABEL = { minute: "Minutes", hour: "Hours", day: "Days", week: "Weeks", month: "Months" };

  function status(msg) { $("#status").textContent = msg || ""; }

  function request(path, opts) {
    opts = opts || {};
    opts.headers = { "Content-Type": "application/json", Accept: opts.accept || "application/json" };
    if (shareToken) opts.headers["X-Tally-Share"] = shareToken;
    else if (token) opts.headers.Authorization = "Bearer " + token;
    else if (account) opts.headers["X-CSRF-Token"] = account.csrf_token;
    return fetch("/v1" + path, opts).then(function (r) {
      // the server's clock, for the realtime view's last 30 minutes
      var date = Date.parse(r.headers.get("Date") || "");
      if (date) skew = date - Date.now();
      if (r.ok && opts.accept === "text/csv") return r.text();
      if (r.status === 204) return null;
      return r.json().catch(function () { return null; }).then(function (body) {
        if (!r.ok) {
          var e = new Error((body && body.error && body.error.message) || "HTTP " + r.status);
          e.status = r.status;
          e.code = body && body.error && body.error.code;
          throw e;
        }
        return body;
      });
    });
  }
  function api(path, opts) { return request(path, opts); }
  function post(path, body, accept) { return request(path, { method: "POST", body: JSON.stringify(body), accept: accept }); }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = String(text);
    return e;
  }

  function cell(row, text, cls) {
    var td = el("td", cls, text == null ? "(none)" : text);
    row.appendChild(td);
    return td;
  }

  // fill replaces a table's rows; data is never parsed as HTML.
  function fill(table, head, rows, render) {
    table.textContent = "";
    var tr = el("tr");
    head.forEach(function (h) { tr.appendChild(el("th", null, h)); });
    table.appendChild(tr);
    if (!rows.length) {
      var r = el("tr");
      cell(r, "Nothing here", "empty").colSpan = head.length;
      table.appendChild(r);
    }
    rows.forEach(function (x) { var r = el("tr"); render(r, x); table.appendChild(r); });
  }

  // ---- formatting ----
  function num(n) { return n == null ? "–" : Number(n).toLocaleString("en-US"); }
  function duration(s) {
    if (s == null) return "–";
    s = Math.round(s);
    var m = Math.floor(s / 60), r = s % 60;
    if (m >= 60) return Math.floor(m / 60) + "h " + (m % 60) + "m";
    return m ? m + "m " + (r < 10 ? "0" : "") + r + "s" : r + "s";
  }
  function metricText(m, v) {
    if (v == null) return "–";
    if (m === "bounce_rate" || m === "percentage" || m === "conversion_rate") return num(v) + "%";
    if (m === "visit_duration") return duration(v);
    if (m === "views_per_visit") return Number(v).toFixed(2);
    return num(v);
  }

  // ---- the view in the URL ----
  function readURL() {
    var q = new URLSearchParams(location.search);
    state.ws = q.get("ws") || "";
    state.site = q.get("site") || "";
    state.period = ["realtime", "day", "7d", "30d", "month", "custom"].indexOf(q.get("period")) >= 0 ? q.get("period") : "30d";
    state.metric = q.get("metric") || "";
    state.interval = INTERVAL_LABEL[q.get("interval")] ? q.get("interval") : "";
    state.from = q.get("from") || "";
    state.to = q.get("to") || "";
    state.prop = q.get("prop") || "";
    state.filters = q.getAll("f").map(function (f) {
      var i = f.indexOf(",");
      if (i < 0) return null;
      try { return [decodeURIComponent(f.slice(0, i)), decodeURIComponent(f.slice(i + 1))]; } catch (e) { return null; }
    }).filter(Boolean);
    state.steps = q.getAll("step");
    if (state.period === "custom" && !(state.from && state.to)) state.period = "30d";
  }

  function writeURL(push) {
    var q = new URLSearchParams();
    if (state.ws) q.set("ws", state.ws);
    if (state.site) q.set("site", state.site);
    q.set("period", state.period);
    if (state.period === "custom") { q.set("from", state.from); q.set("to", state.to); }
    state.filters.forEach(function (f) { q.append("f", encodeURIComponent(f[0]) + "," + encodeURIComponent(f[1])); });
    if (state.prop) q.set("prop", state.prop);
    if (state.metric) q.set("metric", state.metric);
    if (state.interval) q.set("interval", state.interval);
    state.steps.forEach(function (s) { q.append("step", s); });
    var url = location.pathname + "?" + q.toString();
    if (url === location.pathname + location.search) return;
    if (push) history.pushState(null, "", url); else history.replaceState(null, "", url);
  }

  function showControls() {
    $("#period").value = state.period;
    $("#from").value = state.from;
    $("#to").value = state.to;
    var custom = state.period === "custom";
    $("#from-label").hidden = !custom; $("#to-label").hidden = !custom;
    $("#from").required = custom; $("#to").required = custom;
    if (!admin && !shareToken) $("#site-input").value = state.site;
  }

  // ---- queries ----
  // dateRange is the query API's date_range of the view. "Last 7 days" and
  // "Last 30 days" include today, so that today's visitors show beside the
  // current ones (docs/dashboard.md#default-range): the query API's "7d"
  // and "30d" are the whole days before today, so they are sent as dates,
  // ending on the server's today in the site's zone (askToday).
  var siteToday = "", siteTodayAt = 0, skew = 0;
  var LAST_DAYS = { "7d": 7, "30d": 30 };
  function daysBefore(day, n) {
    var d = new Date(day + "T12:00:00Z");
    d.setUTCDate(d.getUTCDate() - n);
    return d.toISOString().slice(0, 10);
  }
  // askToday learns today's date in the site's zone from the query API's
  // echo of "day" (the server's clock, not the browser's), again after a
  // minute.
  function askToday(g) {
    if (!LAST_DAYS[state.period] || (siteToday && Date.now() - siteTodayAt < 60000)) return Promise.resolve();
    return query({ metrics: ["visitors"], date_range: "day" }).then(function (res) {
      var dr = res && res.query && res.query.date_range;
      if (dr && g === gen) { siteToday = String(dr[0]).slice(0, 10); siteTodayAt = Date.now(); }
    });
  }
  // The realtime view is the last 30 minutes by the server's clock (the
  // Date header of its answers, to the second), sent as datetimes.
  function dateRange() {
    if (state.period === "realtime") {
      var now = Date.now() + skew;
      return [new Date(now - 30 * 60000).toISOString(), new Date(now).toISOString()];
    }
    if (state.period === "custom") return [state.from, state.to];
    if (LAST_DAYS[state.period] && siteToday) return [daysBefore(siteToday, LAST_DAYS[state.period] - 1), siteToday];
    return state.period;
  }
  // rangeDays is the number of days the view covers.
  function rangeDays() {
    if (state.period === "realtime" || state.period === "day") return 1;
    if (LAST_DAYS[state.period]) return LAST_DAYS[state.period];
    if (state.period === "month") return 31;
    return Math.round((Date.parse(state.to) - Date.parse(state.from)) / 864e5) + 1 || 1;
  }
  // intervals are the graph's choices for the view, the default first, as
  // Plausible offers them (docs/dashboard.md#visitors-graph).
  function intervals() {
    if (state.period === "realtime") return ["minute"];
    var n = rangeDays();
    if (n <= 1) return ["hour", "minute"];
    if (n <= 7) return ["day", "hour"];
    if (n <= 31) return ["day", "week"];
    return n > 94 ? ["month", "week", "day"] : ["day", "week", "month"];
  }
  function interval() {
    var list = intervals();
    return list.indexOf(state.interval) >= 0 ? state.interval : list[0];
  }
  // apiFilters are the view's filters; all leaves a goal filter out (the
  // site's visitors beside its conversions).
  function apiFilters(all) {
    return state.filters.filter(function (f) { return !all || f[0] !== "event:goal"; }).map(function (f) {
      // a saved segment's id is a number (docs/query-api.md#saved-segments)
      return f[0] === "segment" ? ["is", "segment", [Number(f[1])]] : ["is", f[0], [f[1]]];
    });
  }
  function base() { return "/sites/" + encodeURIComponent(state.site); }
  function query(body, accept) { return post(base() + "/query", body, accept); }

  function panelDim(p) {
    var tab = p.tabs[tabOf[p.id] || 0];
    return p.id === "props" ? (state.prop ? "event:props:" + state.prop : "") : tab.dim;
  }
  // panelQuery asks for the tab's dimensions (a code and its name) or,
  // where the query API refused them, dims.
  function panelQuery(p, limit, dims) {
    var dim = panelDim(p), filters = apiFilters(), tab = p.tabs[tabOf[p.id] || 0];
    // a property's panel lists the events that carry it
    if (p.id === "props") filters.push(["is_not", dim, ["(none)"]]);
    return { metrics: ["visitors", tab.second || p.second], date_range: dateRange(), dimensions: dims || (p.id !== "props" && tab.dims) || [dim], filters: filters, pagination: { limit: limit }, include: { imports: true } };
  }
  // chartQuery is the graph's: the chosen card's metric by the chosen
  // interval, with every bucket's label and, but in realtime, the previous
  // period's figures beside.
  function chartQuery() {
    var c = chartCard(), include = { time_labels: true, imports: true };
    if (state.period !== "realtime") include.comparisons = { mode: "previous_period" };
    return { metrics: [c.m], date_range: dateRange(), dimensions: ["time:" + interval()], filters: apiFilters(c.all), include: include };
  }
  function goalQuery(limit) {
    return { metrics: ["visitors", "events", "conversion_rate"], date_range: dateRange(), dimensions: ["event:goal"], filters: apiFilters(), pagination: { limit: limit } };
  }

  // ---- filters ----
  function label(dim) { return NAMES[dim] || (dim.indexOf("event:props:") === 0 ? "Property " + dim.slice(12) : dim); }

  function addFilter(dim, value) {
    state.filters = state.filters.filter(function (f) { return f[0] !== dim; });
    state.filters.push([dim, value]);
    writeURL(true);
    load();
  }
  function removeFilter(i) {
    state.filters.splice(i, 1);
    writeURL(true);
    load();
  }
  function showFilters() {
    var box = $("#filters");
    box.textContent = "";
    state.filters.forEach(function (f, i) {
      var chip = el("span", "chip");
      chip.appendChild(el("span", null, f[0] === "segment" ? "Segment " + segmentName(f[1]) : label(f[0]) + " is " + f[1]));
      var x = el("button", "chip-x", "×");
      x.type = "button";
      x.title = "Remove filter";
      x.setAttribute("aria-label", "Remove filter " + label(f[0]));
      x.onclick = function () { removeFilter(i); };
      chip.appendChild(x);
      box.appendChild(chip);
    });
  }

  // ---- saved segments (docs/dashboard.md#segments) ----
  // The list is asked for when the picker is opened, or when the view
  // holds a segment (its chip shows the name): never on a first load
  // without one. Applying one is the filter ["segment", id]; saving turns
  // the view's other filters (and the applied segment's) into a new site
  // segment and applies it.
  function segmentOf(id) { return (segmentList || []).filter(function (s) { return String(s.id) === String(id); })[0]; }
  function segmentName(id) { var s = segmentOf(id); return s ? s.name : "#" + id; }
  function loadSegments() {
    var site = state.site;
    return api(base() + "/segments").then(function (b) {
      if (site !== state.site) return;
      segmentList = (b && b.segments) || [];
      showSegments();
      showFilters();
    }, function (e) { if (site === state.site) $("#segment-status").textContent = e.message; });
  }
  function showSegments() {
    var sel = $("#segment-select");
    while (sel.options.length > 1) sel.remove(1);
    (segmentList || []).forEach(function (s) {
      var o = el("option", null, s.name);
      o.value = String(s.id);
      sel.appendChild(o);
    });
    sel.value = "";
    var save = $("#segment-save"); // none on a shared link
    if (save) save.hidden = !state.filters.some(function (f) { return f[0] !== "segment"; });
  }
  function saveSegment(name) {
    var applied = state.filters.filter(function (f) { return f[0] === "segment"; })[0];
    var own = segmentOf(applied && applied[1]);
    if (applied && !own) return Promise.reject(new Error("the applied segment is not in the list: remove it first"));
    var filters = (own ? own.segment_data.filters : []).concat(apiFilters().filter(function (f) { return f[1] !== "segment"; }));
    return post(base() + "/segments", { name: name, type: "site", segment_data: { filters: filters } }).then(function (s) {
      segmentList = [s].concat(segmentList || []);
      state.filters = [["segment", String(s.id)]];
      $("#segment-name").value = "";
      $("#segment-status").textContent = "Saved \u201c" + s.name + "\u201d";
      showSegments();
      writeURL(true);
      return load();
    });
  }

  // ---- renderers ----
  // buildCards shows the view's top stats; a card with a metric is a
  // button that graphs it.
  var cardsOf = null;
  function buildCards() {
    var list = cardList(), box = $("#cards");
    if (cardsOf === list) return;
    cardsOf = list;
    box.textContent = "";
    list.forEach(function (h) {
      var c = el(h.m ? "button" : "div", "card");
      c.id = "card-" + h.k;
      if (h.m) {
        c.type = "button";
        c.title = "Show " + h.label.toLowerCase() + " in the graph";
        c.onclick = function () {
          state.metric = h.k;
          writeURL(true);
          markCard();
          loadChart(gen);
        };
      }
      c.appendChild(el("span", "card-label", h.label));
      c.appendChild(el("strong", "card-value", "–"));
      c.appendChild(el("span", "change", ""));
      box.appendChild(c);
    });
    markCard();
  }
  function markCard() {
    var k = chartCard().k;
    cardsOf.forEach(function (h) {
      if (!h.m) return;
      var c = $("#card-" + h.k);
      c.classList.toggle("on", h.k === k);
      c.setAttribute("aria-pressed", h.k === k ? "true" : "false");
    });
  }

  function showCard(h, value, cmp) {
    var c = $("#card-" + h.k);
    c.querySelector(".card-value").textContent = metricText(h.m, value);
    var ch = c.querySelector(".change");
    ch.className = "change";
    ch.textContent = "";
    if (state.period === "realtime") return;
    var v = cmp ? cmp.change : null;
    if (v == null) { ch.textContent = "no data before"; return; }
    var unit = h.m !== "bounce_rate" ? "%" : Math.abs(v) === 1 ? " pt" : " pts";
    ch.textContent = (v > 0 ? "↑ " : v < 0 ? "↓ " : "") + Math.abs(v) + unit + " vs previous period";
    // a higher bounce rate is worse
    var good = h.m === "bounce_rate" ? v < 0 : v > 0;
    if (v !== 0) ch.classList.add(good ? "up" : "down");
    ch.title = "previous period: " + metricText(h.m, cmp.metrics);
  }

  // loadHeadline asks for the top stats: one query, two with a goal filter
  // (the site's visitors leave it out).
  function loadHeadline(g) {
    var list = cardList(), range = dateRange();
    var include = state.period === "realtime" ? { imports: true } : { comparisons: { mode: "previous_period" }, imports: true };
    var groups = [list.filter(function (h) { return h.m && !h.all; }), list.filter(function (h) { return h.all; })];
    return Promise.all(groups.filter(function (cards) { return cards.length; }).map(function (cards) {
      return query({ metrics: cards.map(function (h) { return h.m; }), date_range: range, filters: apiFilters(cards[0].all), include: include }).then(function (res) {
        if (g !== gen) return;
        var r = res.results[0] || { metrics: [] };
        cards.forEach(function (h, i) { showCard(h, r.metrics[i], r.comparison && { metrics: r.comparison.metrics[i], change: r.comparison.change[i] }); });
        var dr = res.query && res.query.date_range;
        $("#range-label").textContent = state.period === "realtime" ? "Last 30 minutes" : dr ? dr[0].slice(0, 10) + " to " + dr[1].slice(0, 10) : "";
      });
    }));
  }

  // fmtTime is a bucket's label, short: "Mar 9", "13:00", "Week of Mar 9".
  var MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
  function fmtTime(t, iv) {
    var day = MONTHS[Number(t.slice(5, 7)) - 1] + " " + Number(t.slice(8, 10));
    if (iv === "minute" || iv === "hour") return t.slice(11, 16);
    if (iv === "week") return "Week of " + day;
    if (iv === "month") return MONTHS[Number(t.slice(5, 7)) - 1] + " " + t.slice(0, 4);
    return day;
  }
  // niceMax rounds the graph's top up to 1, 2 or 5 times a power of ten.
  function niceMax(v) {
    if (v <= 0) return 1;
    var p = Math.pow(10, Math.floor(Math.log(v) / Math.LN10)), f = v / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
  }

  function showIntervals() {
    var box = $("#intervals"), list = intervals(), cur = interval();
    box.textContent = "";
    if (list.length < 2) return;
    list.slice().sort(function (a, b) { return Object.keys(INTERVAL_LABEL).indexOf(a) - Object.keys(INTERVAL_LABEL).indexOf(b); }).forEach(function (iv) {
      var b = el("button", "tab" + (iv === cur ? " on" : ""), INTERVAL_LABEL[iv]);
      b.type = "button";
      b.setAttribute("data-interval", iv);
      b.onclick = function () { state.interval = iv; writeURL(true); showIntervals(); loadChart(gen); };
      box.appendChild(b);
    });
  }

  function loadChart(g) {
    var c = chartCard(), iv = interval();
    $("#chart-title").textContent = c.graph || c.label;
    $("#chart").classList.add("loading");
    showIntervals();
    return query(chartQuery()).then(function (res) {
      if (g !== gen) return;
      chart(res, c, iv);
    }, function (e) {
      if (g !== gen) return;
      var box = $("#chart");
      box.classList.remove("loading");
      box.textContent = "";
      box.appendChild(el("p", "empty", e.message));
    });
  }

  // chart draws the graph as a line, the previous period as a dashed one
  // (the query API's comparison of each bucket: the bucket at the same
  // place of the previous range); a bucket with no data is 0. Each bucket
  // has a rect to hover (its title the bucket's figure), shaded where the
  // figure comes from imported history.
  function chart(res, card, iv) {
    var box = $("#chart"), ns = "http://www.w3.org/2000/svg", m = card.m;
    var labels = (res.meta && res.meta.time_labels) || [];
    var by = {}, prev = {}, prevLabel = {}, compared = false;
    res.results.forEach(function (r) {
      by[r.dimensions[0]] = r.metrics[0];
      if (r.comparison) { compared = true; prev[r.dimensions[0]] = r.comparison.metrics[0]; prevLabel[r.dimensions[0]] = r.comparison.dimensions[0]; }
    });
    var pts = labels.map(function (l) { return { t: l, v: by[l] || 0, p: prev[l] || 0, pt: prevLabel[l] }; });
    box.classList.remove("loading");
    box.textContent = "";
    var top = niceMax(Math.max.apply(null, pts.map(function (p) { return compared ? Math.max(p.v, p.p) : p.v; }).concat([0])));
    // imported history (docs/import.md): its days are shaded and named
    // under the graph
    var imported = (res.meta && res.meta.imported_ranges) || [];
    var included = res.meta && res.meta.imports_included;
    function isImported(t) {
      return included && imported.some(function (r) { return t.slice(0, 10) >= r[0] && t.slice(0, 10) <= r[1]; });
    }
    var plot = el("div", "plot");
    var yaxis = el("div", "y-axis");
    // counts are whole: no "0.5 visitors" half way up
    var whole = ["visitors", "visits", "pageviews", "events"].indexOf(m) >= 0;
    [top, top / 2, 0].forEach(function (v) { yaxis.appendChild(el("span", null, whole && v % 1 ? "" : metricText(m, v))); });
    plot.appendChild(yaxis);
    var svg = document.createElementNS(ns, "svg");
    var W = 1000, H = 200, n = Math.max(pts.length, 1);
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    svg.setAttribute("preserveAspectRatio", "none");
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", (card.graph || card.label) + " by " + iv);
    function x(i) { return (i + 0.5) * W / n; }
    function y(v) { return H - 2 - v / top * (H - 6); }
    function svgEl(tag, attrs) {
      var e = document.createElementNS(ns, tag);
      Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
      svg.appendChild(e);
      return e;
    }
    [0, 0.5, 1].forEach(function (f) { svgEl("line", { x1: 0, x2: W, y1: y(top * f), y2: y(top * f), "class": "grid" }); });
    var tip = $("#chart-tip");
    pts.forEach(function (p, i) {
      var from = isImported(p.t);
      var r = svgEl("rect", { x: i * W / n, width: W / n, y: 0, height: H });
      if (from) r.setAttribute("class", "imported");
      var title = document.createElementNS(ns, "title");
      title.textContent = p.t + ": " + metricText(m, p.v) + " " + card.unit + (from ? " (imported)" : "");
      r.appendChild(title);
      r.onmouseenter = function () {
        tip.textContent = fmtTime(p.t, iv) + ": " + metricText(m, p.v) + " " + card.unit +
          (compared ? " · previous period" + (p.pt ? " (" + fmtTime(p.pt, iv) + ")" : "") + ": " + metricText(m, p.p) : "");
      };
    });
    svg.onmouseleave = function () { tip.textContent = ""; };
    function line(key, cls) {
      var d = pts.map(function (p, i) { return (i ? "L" : "M") + x(i).toFixed(1) + " " + y(p[key]).toFixed(1); }).join("");
      if (d) svgEl("path", { d: d, "class": cls });
    }
    if (compared) line("p", "line prev");
    line("v", "line");
    if (pts.length === 1) svgEl("circle", { cx: x(0), cy: y(pts[0].v), r: 4, "class": "dot" });
    plot.appendChild(svg);
    box.appendChild(plot);
    var axis = el("div", "chart-axis");
    [0, Math.floor((pts.length - 1) / 2), pts.length - 1].filter(function (i, j, all) { return i >= 0 && all.indexOf(i) === j; }).forEach(function (i) {
      axis.appendChild(el("span", null, fmtTime(pts[i].t, iv)));
    });
    box.appendChild(axis);
    if (compared) {
      var legend = el("p", "chart-note legend");
      legend.appendChild(el("span", "key now", "This period"));
      legend.appendChild(el("span", "key prev", "Previous period"));
      box.appendChild(legend);
    }
    if (imported.length) {
      var days = imported.map(function (r) { return r[0] === r[1] ? r[0] : r[0] + " to " + r[1]; }).join(", ");
      var note = el("p", "chart-note");
      note.id = "imported-note";
      note.textContent = included ? "Imported history: " + days + " (lighter bars)."
        : "Imported history of " + days + " is not in these figures: " + (res.meta.imports_warning || res.meta.imports_skip_reason);
      box.appendChild(note);
    }
  }

  function buildPanels() {
    var box = $("#panels");
    box.textContent = "";
    PANELS.forEach(function (p) {
      var d = el("div", "box panel");
      d.id = "panel-" + p.id;
      var head = el("div", "box-head");
      head.appendChild(el("h2", null, p.title));
      // a panel titled by its tab, as Plausible's pages panel is
      var h2 = head.lastChild;
      if (p.tabs.length > 1) {
        var tabs = el("span", "tabs");
        p.tabs.forEach(function (t, i) {
          var b = el("button", "tab" + (i === (tabOf[p.id] || 0) ? " on" : ""), t.label);
          b.type = "button";
          b.onclick = function () {
            tabOf[p.id] = i;
            tabs.querySelectorAll(".tab").forEach(function (x, j) { x.classList.toggle("on", j === i); });
            if (p.id === "pages") h2.textContent = t.label;
            $("#t-" + p.id).removeAttribute("data-loaded");
            loadPanel(p, gen);
          };
          tabs.appendChild(b);
        });
        head.appendChild(tabs);
      }
      if (p.id === "props") {
        var sel = el("select");
        sel.id = "prop-select";
        sel.setAttribute("aria-label", "Property");
        sel.onchange = function () { state.prop = sel.value; writeURL(true); loadPanel(p, gen); };
        head.appendChild(sel);
      }
      var csv = el("button", "csv", "CSV");
      csv.type = "button";
      csv.setAttribute("data-panel", p.id);
      head.appendChild(csv);
      d.appendChild(head);
      if (p.tabs.some(function (t) { return t.map; })) {
        var map = el("div", "map");
        map.id = "map-" + p.id;
        d.appendChild(map);
      }
      var t = el("table");
      t.id = "t-" + p.id;
      d.appendChild(t);
      box.appendChild(d);
    });
  }

  // rows shows a breakdown; clicking a row filters the whole dashboard by
  // it. A row's value is its first dimension, its label the last one (a
  // region's name beside its code) or names[value].
  function rows(table, dim, head, res, metrics, names) {
    var max = Math.max.apply(null, res.results.map(function (r) { return r.metrics[0]; }).concat([1]));
    fill(table, head, res.results, function (tr, r) {
      var value = r.dimensions[0], shown = r.dimensions[r.dimensions.length - 1];
      if (names && names[value]) shown = names[value];
      tr.className = "row";
      tr.setAttribute("data-value", value);
      tr.tabIndex = 0;
      tr.setAttribute("role", "button");
      tr.title = "Filter by " + label(dim) + " " + shown;
      var td = cell(tr, "", "label");
      var bar = el("span", "bar");
      bar.style.width = (r.metrics[0] / max * 100).toFixed(1) + "%";
      td.appendChild(bar);
      td.appendChild(el("span", "v", shown));
      metrics.forEach(function (m, i) { cell(tr, metricText(m, r.metrics[i]), "n"); });
      tr.onclick = function () { addFilter(dim, value); };
      tr.onkeydown = function (ev) { if (ev.key === "Enter") addFilter(dim, value); };
    });
    table.setAttribute("data-loaded", gen);
  }

  function message(table, text) {
    table.textContent = "";
    var r = el("tr");
    cell(r, text, "empty");
    table.appendChild(r);
    table.setAttribute("data-loaded", gen);
  }

  function loadPanel(p, g) {
    var table = $("#t-" + p.id), dim = panelDim(p), tab = p.tabs[tabOf[p.id] || 0];
    var map = $("#map-" + p.id);
    if (map) { map.hidden = !tab.map; table.hidden = !!tab.map; }
    if (!dim) { message(table, "No custom properties seen"); return Promise.resolve(); }
    table.classList.add("loading");
    // countries are named from the map's file, which the map tab needs
    var names = dim === "visit:country" ? loadWorld().then(function (w) { return w.names; }, function () { return null; }) : Promise.resolve(null);
    var ask = query(panelQuery(p, tab.map ? 300 : 10)).catch(function (e) {
      if (e.status === 400 && tab.alt) return query(panelQuery(p, 10, tab.alt));
      throw e;
    });
    return Promise.all([ask, names]).then(function (both) {
      if (g !== gen) return;
      var res = both[0];
      table.classList.remove("loading");
      if (tab.map) res = { results: res.results.slice(0, 10), world: res.results };
      var second = tab.second || p.second;
      rows(table, dim, [tab.head || tab.label, "Visitors", METRIC_LABEL[second]], res, ["visitors", second], both[1]);
      if (tab.map) return loadWorld().then(function (w) { if (g === gen) drawMap(map, w, res.world); }, function (e) { map.textContent = e.message; });
    }, function (e) {
      if (g !== gen) return;
      table.classList.remove("loading");
      table.hidden = false;
      if (map) map.hidden = true;
      // a location the query API does not answer (yet): no data
      message(table, e.status === 400 && tab.optional ? "No data (" + e.message + ")" : e.message);
    });
  }

  // loadWorld fetches the world map once (docs/dashboard.md#locations).
  function loadWorld() {
    if (!worldMap) {
      worldMap = fetch("/v1/ui/world.json").then(function (r) {
        if (!r.ok) throw new Error("The world map did not load: HTTP " + r.status);
        return r.json();
      });
      worldMap.catch(function () { worldMap = null; });
    }
    return worldMap;
  }

  // drawMap shades each country by its visitors; a click filters by it.
  function drawMap(box, world, results) {
    var ns = "http://www.w3.org/2000/svg", by = {};
    results.forEach(function (r) { by[r.dimensions[0]] = r.metrics[0]; });
    var max = Math.max.apply(null, results.map(function (r) { return r.metrics[0]; }).concat([1]));
    box.textContent = "";
    var svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", world.view_box);
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", "Visitors by country");
    world.countries.forEach(function (c) {
      var path = document.createElementNS(ns, "path"), v = by[c.id];
      path.setAttribute("d", c.d);
      path.setAttribute("data-country", c.id);
      if (v) {
        path.setAttribute("class", "seen");
        path.setAttribute("fill-opacity", (0.25 + 0.75 * v / max).toFixed(2));
        path.onclick = function () { addFilter("visit:country", c.id); };
      }
      var title = document.createElementNS(ns, "title");
      title.textContent = (world.names[c.id] || c.id) + ": " + num(v || 0) + " visitors";
      path.appendChild(title);
      svg.appendChild(path);
    });
    box.appendChild(svg);
    box.appendChild(el("p", "chart-note", "Map: Natural Earth, via world-atlas."));
  }

  function loadProps(g) {
    return api(base() + "/properties").then(function (b) {
      if (g !== gen) return;
      var sel = $("#prop-select"), names = b.properties || [];
      sel.textContent = "";
      if (state.prop && names.indexOf(state.prop) < 0) names = [state.prop].concat(names);
      names.forEach(function (n) { var o = el("option", null, n); o.value = n; sel.appendChild(o); });
      // the default is the server's (the name the warm-up keeps partials of)
      if (!state.prop) state.prop = b.default || "";
      sel.value = state.prop;
      sel.hidden = !names.length;
    }, function () { $("#prop-select").hidden = true; });
  }

  // loadGoals loads the goal list, then the goal figures and the funnel
  // side by side: the funnel needs the list, not the figures
  // (docs/dashboard.md, First paint).
  function loadGoals(g) {
    var table = $("#goals");
    var list = api(base() + "/goals").then(function (b) {
      if (g !== gen) return false;
      goalList = (b && b.goals) || [];
      return true;
    }, function (e) {
      if (g !== gen) return false;
      if (e.status === 404) goalList = null;
      message(table, e.status === 404 ? "Goals are not available" : e.message);
      return "failed";
    });
    var figures = list.then(function (ok) {
      if (ok !== true) return null;
      if (!goalList.length) { noGoals(table); return null; }
      return query(goalQuery(100)).then(function (res) {
        if (g !== gen) return;
        rows(table, "event:goal", ["Goal", "Visitors", "Events", "CR"], res, ["visitors", "events", "conversion_rate"]);
      }, function (e) { if (g === gen) message(table, e.message); });
    });
    var funnel = list.then(function (ok) { return ok && g === gen ? loadFunnel(g) : null; });
    // the saved funnels' list only where a funnel can be (two goals or more)
    var saved = list.then(function (ok) {
      if (ok === true && g === gen && goalList.length >= 2) return loadSavedFunnels(g);
      if (g === gen) { savedFunnels = []; $("#funnel-saved").hidden = true; }
    });
    return Promise.all([figures, funnel, saved]);
  }

  // noGoals says the site has no goals, with a link to the settings page
  // where an admin creates them (docs/dashboard.md#settings).
  function noGoals(table) {
    // a viewer cannot create them (the header's link reads Account for it)
    if ($("#settings-link").textContent !== "Settings") { message(table, "No goals yet: an admin or owner of the workspace creates them in Settings."); return; }
    message(table, "No goals yet. ");
    var a = el("a", null, "Create them in Settings");
    a.id = "goals-settings";
    a.href = "/v1/ui/settings.html?" + new URLSearchParams({ ws: state.ws, site: state.site, page: "goals" }).toString();
    table.querySelector("td").appendChild(a);
  }

  // loadSavedFunnels fills the picker of the site's saved funnels
  // (docs/query-api.md#saved-funnels): choosing one sets the steps, as
  // picking them one by one would (they stay in the URL). Hidden when the
  // site has none, or the server has no saved funnels.
  var savedFunnels = [];
  function loadSavedFunnels(g) {
    var sel = $("#funnel-saved");
    return api(base() + "/funnels").then(function (b) {
      if (g !== gen) return;
      savedFunnels = (b && b.funnels) || [];
      sel.textContent = "";
      var none = el("option", null, "Saved funnels");
      none.value = "";
      sel.appendChild(none);
      savedFunnels.forEach(function (f, i) { var o = el("option", null, f.name); o.value = String(i); sel.appendChild(o); });
      sel.value = "";
      savedFunnels.forEach(function (f, i) {
        var names = f.steps.map(function (st) { return st.name; });
        if (names.join("\u0000") === state.steps.join("\u0000")) sel.value = String(i);
      });
      sel.hidden = !savedFunnels.length;
    }, function () { if (g === gen) { savedFunnels = []; sel.hidden = true; } });
  }

  function funnelSelects() {
    var box = $("#funnel-steps");
    box.textContent = "";
    if (!goalList || goalList.length < 2) return;
    var n = Math.min(state.steps.length + 1, 8);
    for (var i = 0; i < n; i++) {
      (function (i) {
        var sel = el("select");
        sel.setAttribute("aria-label", "Step " + (i + 1));
        var none = el("option", null, i < state.steps.length ? "(remove step)" : "(add a step)");
        none.value = "";
        sel.appendChild(none);
        goalList.forEach(function (gl) { var o = el("option", null, gl.name); o.value = gl.name; sel.appendChild(o); });
        sel.value = state.steps[i] || "";
        sel.onchange = function () {
          if (sel.value) state.steps[i] = sel.value; else state.steps.splice(i, 1);
          $("#funnel-saved").value = "";
          writeURL(true);
          funnelSelects();
          loadFunnel(gen);
        };
        box.appendChild(sel);
      })(i);
    }
  }

  function loadFunnel(g) {
    var box = $("#funnel");
    box.textContent = "";
    box.removeAttribute("data-loaded");
    lastFunnel = null;
    if (!goalList) { box.appendChild(el("p", "empty", "Goals are not available")); box.setAttribute("data-loaded", g); return Promise.resolve(); }
    if (goalList.length < 2) { box.appendChild(el("p", "empty", "A funnel needs two goals or more")); box.setAttribute("data-loaded", g); return Promise.resolve(); }
    var names = goalList.map(function (x) { return x.name; });
    state.steps = state.steps.filter(function (s) { return names.indexOf(s) >= 0; });
    funnelSelects();
    // no funnel until one is defined: the steps are the user's, in the URL
    // (docs/dashboard.md#funnel)
    if (state.steps.length < 2) {
      box.appendChild(el("p", "empty", state.steps.length ? "Pick one more goal above as the next step to see the funnel."
        : "No funnel yet: pick two goals or more above, in the order a visitor should reach them, to define one (it is kept in the URL)."));
      box.setAttribute("data-loaded", g);
      return Promise.resolve();
    }
    return post(base() + "/funnel", { steps: state.steps, date_range: dateRange(), filters: apiFilters() }).then(function (res) {
      if (g !== gen) return;
      lastFunnel = res.steps;
      box.textContent = "";
      var t = el("table");
      t.id = "funnel-table";
      fill(t, ["Step", "Visitors", "Conversion", "Dropoff"], res.steps, function (tr, s) {
        var td = cell(tr, "", "label");
        var bar = el("span", "bar");
        bar.style.width = Math.min(Number(s.conversion_rate) || 0, 100) + "%";
        td.appendChild(bar);
        td.appendChild(el("span", "v", s.goal));
        cell(tr, num(s.visitors), "n");
        cell(tr, metricText("conversion_rate", s.conversion_rate), "n");
        cell(tr, num(s.dropoff), "n");
      });
      box.appendChild(t);
      var purged = res.purged_range;
      if (purged && purged.length === 2) {
        box.appendChild(el("p", "empty", "Retention purged the raw events of " + purged[0].slice(0, 10) + " to " + purged[1].slice(0, 10) + ": those days count no step."));
      }
      box.setAttribute("data-loaded", g);
    }, function (e) { if (g === gen) { box.appendChild(el("p", "empty", e.message)); box.setAttribute("data-loaded", g); } });
  }

  function realtime() {
    if (realtimeTimer) clearInterval(realtimeTimer);
    var site = state.site;
    var tick = function () {
      api("/sites/" + encodeURIComponent(site) + "/realtime").then(function (b) {
        if (site !== state.site) return;
        $("#realtime-count").textContent = num(b.visitors);
        $("#realtime").hidden = false;
        var card = $("#card-current .card-value");
        if (card) card.textContent = num(b.visitors);
      }, function () { $("#realtime").hidden = true; });
    };
    tick();
    realtimeTimer = setInterval(tick, 10000);
  }

  var loadedSite = "", unknownSite = "";
  function load() {
    if (!state.site) {
      status(unknownSite ? "Unknown site \u201c" + unknownSite + "\u201d: there is no such site in this workspace. Pick a site." : "Pick a site.");
      return Promise.resolve();
    }
    var g = ++gen;
    if (refreshTimer) { clearTimeout(refreshTimer); refreshTimer = null; }
    document.body.removeAttribute("data-ready");
    status("");
    showControls();
    showFilters();
    if (segmentList) showSegments();
    buildCards();
    markCard();
    var first = [];
    // the realtime view's current visitors card asks at once
    if (loadedSite === state.site && state.period === "realtime") realtime();
    if (loadedSite !== state.site) {
      loadedSite = state.site;
      siteToday = "";
      segmentList = null;
      $("#segment-status").textContent = "";
      if ($("#segments").open || state.filters.some(function (f) { return f[0] === "segment"; })) first.push(loadSegments());
      realtime();
      first.push(api(base()).then(function (s) {
        $("#tz-label").textContent = "· times in " + s.time_zone + ", the site's time zone";
      }, function (e) { status(e.message); }));
    }
    // today's date first: the ranges that include it end there
    return askToday(g).catch(function (e) { status(e.message); }).then(function () { return loadPanels(g, first); });
  }

  function loadPanels(g, first) {
    if (g !== gen) return Promise.resolve();
    var jobs = [loadHeadline(g), loadChart(g)];
    PANELS.forEach(function (p) {
      // a property named in the URL is queried at once, beside the names
      if (p.id !== "props") jobs.push(loadPanel(p, g));
      else if (state.prop) jobs.push(loadPanel(p, g), loadProps(g));
      else jobs.push(loadProps(g).then(function () { return loadPanel(p, g); }));
    });
    jobs.push(loadGoals(g));
    if ($("#tools") && $("#tools").open) jobs.push(loadAdmin());
    return Promise.all(jobs.concat(first).map(function (j) { return j.catch(function (e) { status(e.message); }); })).then(function () {
      if (g !== gen) return;
      // the moment every panel shows its answer (docs/dashboard.md: first paint)
      performance.mark("tally-panels-" + g);
      document.body.setAttribute("data-ready", g);
      // the realtime view asks again, without a reload, while it is shown
      // (window.tallyRefreshMs: tests' shorter period)
      if (state.period === "realtime") {
        var again = function () {
          if (g !== gen || state.period !== "realtime") return;
          // a hidden tab asks nothing until it is shown again
          if (document.hidden) { refreshTimer = setTimeout(again, 1000); return; }
          load();
        };
        refreshTimer = setTimeout(again, window.tallyRefreshMs || 10000);
      }
    });
  }

  // csvCell quotes a value as the query API's CSV does, a leading = + - @
  // tab or carriage return prefixed with ' (docs/query-api.md).
  function csvCell(v) {
    v = String(v);
    if (/^[=+\-@\t\r]/.test(v)) v = "'" + v;
    return /[",\r\n]/.test(v) ? '"' + v.replace(/"/g, '""') + '"' : v;
  }

  function save(text, name) {
    var a = el("a");
    a.href = URL.createObjectURL(new Blob([text], { type: "text/csv" }));
    a.download = state.site + "-" + name + "-" + (state.period === "custom" ? state.from + "-" + state.to : state.period) + ".csv";
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(function () { URL.revokeObjectURL(a.href); }, 10000);
  }

  function download(id) {
    var body, name;
    if (id === "funnel") {
      // the funnel is not a query API report: its answer as CSV
      if (!lastFunnel) return;
      save(["goal,visitors,conversion_rate,dropoff"].concat(lastFunnel.map(function (s) {
        return [csvCell(s.goal), s.visitors, s.conversion_rate, s.dropoff].join(",");
      })).join("\n") + "\n", "funnel");
      return;
    }
    if (id === "chart") { body = chartQuery(); name = "visitors"; }
    else if (id === "goals") { body = goalQuery(10000); name = "goals"; }
    else {
      var p = PANELS.filter(function (x) { return x.id === id; })[0];
      if (!panelDim(p)) return;
      body = panelQuery(p, 10000);
      name = panelDim(p).replace(/[^a-z0-9_]+/gi, "-");
    }
    query(body, "text/csv").then(function (text) { save(text, name); }, function (e) { status(e.message); });
  }

  function loadAdmin() {
    var b = base();
    var slug = admin ? $("#workspace").value : (token.indexOf("sk_") === 0 ? token.slice(3, token.length - 33) : "");
    return Promise.all([api(b + "/dlq?limit=50"), slug ? api("/workspaces/" + encodeURIComponent(slug) + "/audit?limit=50") : null])
      .then(function (res) {
        $("#admin").hidden = false;
        fill($("#dlq"), ["Received", "Event", "Errors", ""], res[0].events, function (r, x) {
          cell(r, x.received_at);
          cell(r, (x.payload && x.payload.type) || x.id);
          cell(r, (x.error || []).map(function (e) { return e.path + " " + e.message; }).join("; "));
          var btn = el("button", null, "Replay");
          btn.onclick = function () {
            api(b + "/dlq/" + encodeURIComponent(x.id) + "/replay", { method: "POST" })
              .then(function () { status("Replayed " + x.id); return loadAdmin(); }, function (e) { status(e.message); });
          };
          r.appendChild(el("td")).appendChild(btn);
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
    var list = account ? Promise.resolve({ sites: account.workspaces.filter(function (w) { return w.slug === $("#workspace").value; }).concat([{ sites: [] }])[0].sites })
      : api("/workspaces/" + encodeURIComponent($("#workspace").value) + "/sites");
    return list.then(function (s) {
      var sel = $("#site-select");
      sel.textContent = "";
      s.sites.forEach(function (x) { var o = el("option", null, x.name + " (" + x.id + ")"); o.value = x.id; sel.appendChild(o); });
      // An unknown ?site= says so instead of showing another site
      // (docs/dashboard.md#unknown-site).
      unknownSite = "";
      if (state.site && !s.sites.some(function (x) { return x.id === state.site; })) {
        unknownSite = state.site;
        var none = el("option", null, "Pick a site"); none.value = ""; sel.insertBefore(none, sel.firstChild);
      }
      sel.value = unknownSite ? "" : (state.site || sel.value);
      state.site = sel.value;
      state.ws = $("#workspace").value;
      if (!unknownSite) writeURL(false);
    });
  }

  function showSignin(on) {
    $("#signin").hidden = !on; $("#account-signin").hidden = !on;
  }

  function start() {
    showSignin(false); $("#set-password").hidden = true; $("#app").hidden = false; $("#signout").hidden = false;
    readURL();
    showControls();
    var workspaces = account ? Promise.resolve({ workspaces: account.workspaces }) : api("/workspaces");
    return workspaces.then(function (w) {
      admin = true;
      settingsLink(w.workspaces);
      $("#ws-label").hidden = false; $("#site-select-label").hidden = false;
      var sel = $("#workspace");
      sel.textContent = "";
      w.workspaces.forEach(function (x) { var o = el("option", null, x.name); o.value = x.slug; sel.appendChild(o); });
      if (state.ws && w.workspaces.some(function (x) { return x.slug === state.ws; })) sel.value = state.ws;
      return sites().then(load);
    }, function (e) {
      if (e.status === 401) { signout(); status("That token was not accepted."); return; }
      admin = false;
      $("#site-input-label").hidden = false;
      showControls();
      if (state.site) return load();
      status("Enter the site id to show.");
    });
  }

  // settingsLink offers the settings (docs/dashboard.md#settings): to the
  // admin token and to admins and owners; a viewer's account has only its
  // own page there (password, sessions, two-factor).
  function settingsLink(list) {
    var a = $("#settings-link");
    var manages = !account || list.some(function (x) { return x.role === "admin" || x.role === "owner"; });
    a.textContent = manages ? "Settings" : "Account";
    a.hidden = false;
  }

  // startShared shows a shared link's site: no sign-in, no site picker,
  // no tools; its password form first when the link has one not given yet.
  function startShared() {
    ["#signin", "#account-signin", "#set-password", "#signout", "#settings-link", "#tools", "#segment-save", "#ws-label", "#site-select-label", "#site-input-label"]
      .forEach(function (s) { var e = $(s); if (e) e.remove(); });
    document.body.classList.add("shared");
    return api("/share").then(function (info) {
      if (!info.unlocked) {
        $("#share-password").hidden = false;
        $("#share-pw").focus();
        return;
      }
      $("#share-password").hidden = true;
      readURL();
      state.ws = "";
      state.site = info.site.id;
      $("h1").textContent = info.site.name;
      document.title = info.site.name + " \u00b7 Tally";
      $("#app").hidden = false;
      showControls();
      return load();
    }, function (e) {
      status(e.status === 404 ? "This shared link does not exist, or it was revoked." : e.message);
    });
  }

  function signout() {
    if (account) post("/auth/signout", {}).catch(function () {}); // the cookie goes with the session
    account = null;
    localStorage.removeItem("tally_account");
    sessionStorage.removeItem("tally_token");
    token = null;
    if (realtimeTimer) clearInterval(realtimeTimer);
    if (refreshTimer) clearTimeout(refreshTimer);
    gen++; // answers still on their way are dropped
    $("#app").hidden = true; $("#signout").hidden = true; $("#settings-link").hidden = true; showSignin(true); $("#realtime").hidden = true;
  }

  buildCards();
  buildPanels();
  $("#account-signin").onsubmit = function (ev) {
    ev.preventDefault();
    var body = { email: $("#email").value.trim(), password: $("#password").value };
    if (!$("#totp-label").hidden) body.totp = $("#totp").value.trim();
    post("/auth/signin", body).then(function (a) {
      account = a;
      localStorage.setItem("tally_account", "1");
      $("#password").value = ""; $("#totp").value = ""; $("#totp-label").hidden = true;
      status("");
      start();
    }, function (e) {
      if (e.code === "totp_required") { $("#totp-label").hidden = false; $("#totp").focus(); }
      status(e.message);
    });
  };
  // A forgotten password: the server mails a reset link to the typed
  // email's account, and answers the same whatever the email
  // (docs/email.md#password-reset-by-email).
  $("#forgot").onclick = function () {
    var email = $("#email").value.trim();
    if (!email) { status("Type your email first, then ask for the link."); $("#email").focus(); return; }
    post("/auth/password/forgot", { email: email }).then(function (a) { status(a.status); }, function (e) { status(e.message); });
  };
  // A link's token (an invitation, a set-password or reset link) is in
  // the URL's fragment, which no server sees.
  var link = /^#(invite|password)=(.+)$/.exec(location.hash);
  $("#set-password").onsubmit = function (ev) {
    ev.preventDefault();
    var pw = $("#new-password").value;
    // Signed in already, the invitation adds its workspace to this user.
    var done = link[1] === "invite"
      ? fetch("/v1/auth/session").then(function (r) { return r.ok ? r.json() : null; }).then(function (a) {
        account = a;
        return post("/auth/invitations/accept", a ? { token: link[2] } : { token: link[2], password: pw });
      }).then(function (a) { account = a; localStorage.setItem("tally_account", "1"); })
      : post("/auth/password-reset", { token: link[2], password: pw }).then(function () { status("Password saved: sign in with it."); });
    done.then(function () {
      history.replaceState(null, "", location.pathname + location.search);
      $("#new-password").value = "";
      $("#set-password").hidden = true;
      if (account) start(); else showSignin(true);
    }, function (e) { status(e.message); });
  };
  $("#share-password").onsubmit = function (ev) {
    ev.preventDefault();
    $("#share-error").textContent = "";
    fetch("/share/" + shareToken + "/auth", { method: "POST", headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ password: $("#share-pw").value }) }).then(function (r) {
      if (r.ok) { $("#share-pw").value = ""; return startShared(); }
      return r.json().catch(function () { return null; }).then(function (b) {
        $("#share-error").textContent = (b && b.error && b.error.message) || "HTTP " + r.status;
      });
    }, function (e) { $("#share-error").textContent = e.message; });
  };
  $("#signin").onsubmit = function (ev) {
    ev.preventDefault();
    token = $("#token").value.trim();
    sessionStorage.setItem("tally_token", token);
    status("");
    start();
  };
  $("#period").onchange = function () {
    state.period = $("#period").value;
    if (state.period === "custom") {
      if (!state.to) state.to = new Date().toISOString().slice(0, 10);
      if (!state.from) state.from = new Date(Date.now() - 29 * 864e5).toISOString().slice(0, 10);
    }
    writeURL(true);
    load();
  };
  $("#pick").onsubmit = function (ev) {
    ev.preventDefault();
    if (!admin && !shareToken) state.site = $("#site-input").value.trim();
    state.period = $("#period").value;
    state.from = $("#from").value; state.to = $("#to").value;
    writeURL(true);
    load();
  };
  $("#site-select").onchange = function () { unknownSite = ""; state.site = $("#site-select").value; state.filters = []; state.steps = []; writeURL(true); load(); };
  $("#workspace").onchange = function () { state.site = ""; state.filters = []; state.steps = []; sites().then(load); };
  $("#signout").onclick = signout;
  $("#segments").addEventListener("toggle", function () { if ($("#segments").open && state.site && !segmentList) loadSegments(); });
  $("#funnel-saved").onchange = function () {
    var f = savedFunnels[Number($("#funnel-saved").value)];
    if (!f) return;
    state.steps = f.steps.map(function (st) { return st.name; });
    writeURL(true);
    loadFunnel(gen);
  };
  $("#segment-select").onchange = function () { var v = $("#segment-select").value; if (v) addFilter("segment", v); };
  $("#segment-save").onsubmit = function (ev) {
    ev.preventDefault();
    $("#segment-status").textContent = "";
    saveSegment($("#segment-name").value.trim()).catch(function (e) { $("#segment-status").textContent = e.message; });
  };
  $("#tools").addEventListener("toggle", function () { if ($("#tools").open && state.site) loadAdmin().catch(function (e) { status(e.message); }); });
  document.addEventListener("click", function (ev) {
    var b = ev.target.closest && ev.target.closest("button.csv");
    if (b) download(b.getAttribute("data-panel"));
  });
  window.addEventListener("popstate", function () {
    if (!token && !shareToken) return;
    readURL();
    if (shareToken) state.site = loadedSite;
    if (admin) $("#site-select").value = state.site;
    load();
  });
  $("#timeline-form").onsubmit = function (ev) {
    ev.preventDefault();
    var path = base() + "/users/" + encodeURIComponent($("#user-id").value.trim()) + "/timeline?limit=100";
    api(path).then(function (t) {
      status("");
      fill($("#timeline"), ["Time", "Event", "URL", "Device"], t.events, function (r, x) {
        cell(r, x.ts); cell(r, x.type); cell(r, x.url); cell(r, [x.browser, x.os, x.device_type].filter(Boolean).join(", "));
      });
    }, function (e) { status(e.message); });
  };

  if (shareToken) startShared();
  else if (link) {
    $("#set-password-title").textContent = link[1] === "invite" ? "Accept the invitation: choose a password" : "Choose a password";
    $("#set-password").hidden = false;
  } else if (token) start();
  else if (!localStorage.getItem("tally_account")) showSignin(true);
  else {
    // Signed in already (in this tab or another)? The session cookie says
    // so, if it is still there; the mark only saves asking when not.
    fetch("/v1/auth/session", { headers: { Accept: "application/json" } }).then(function (r) {
      return r.ok ? r.json() : null;
    }).then(function (a) {
      if (a) { account = a; start(); } else { localStorage.removeItem("tally_account"); showSignin(true); }
    }, function () { showSignin(true); });
  }
})();
