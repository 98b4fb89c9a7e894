// Settings › Imports: upload another product's export into the site
// (docs/import.md). The file goes to the server as it is
// (POST /v1/sites/:siteId/imports/:source), which reads it with the same
// Go readers as `tally import`; the bar shows the upload's bytes (XHR's
// upload events, which fetch does not give), then the server's counts.
(function () {
  "use strict";
  var SOURCES = [
    { id: "plausible", label: "Plausible (CSV export, .zip)", accept: ".zip" },
    { id: "umami", label: "Umami (CSV, .csv or .csv.gz)", accept: ".csv,.gz" },
    { id: "goatcounter", label: "GoatCounter (CSV, .csv or .csv.gz)", accept: ".csv,.gz" },
    { id: "tally", label: "Tally export (NDJSON, .ndjson or .gz)", accept: ".ndjson,.jsonl,.json,.gz" }
  ];

  // guess is the source a file's name suggests, else "".
  function guess(name) {
    name = name.toLowerCase();
    if (/\.zip$/.test(name)) return "plausible";
    if (/goatcounter/.test(name)) return "goatcounter";
    if (/umami/.test(name)) return "umami";
    if (/\.(nd)?jsonl?(\.gz)?$|\.json(\.gz)?$/.test(name)) return "tally";
    return "";
  }

  // upload sends file with XHR, calling progress(loaded, total) as its
  // bytes go; it answers the server's JSON, or fails with the API's error
  // (status, code, message, details) as ctx.api does.
  function upload(c, path, file, progress, uploaded) {
    return new Promise(function (resolve, reject) {
      var x = new XMLHttpRequest();
      x.open("POST", "/v1" + path);
      var h = c.authHeaders({ Accept: "application/json", "Content-Type": file.type || "application/octet-stream" });
      Object.keys(h).forEach(function (k) { x.setRequestHeader(k, h[k]); });
      x.upload.onprogress = function (ev) { if (ev.lengthComputable) progress(ev.loaded, ev.total); };
      x.upload.onload = function () { uploaded(); };
      x.onload = function () {
        var body = null;
        try { body = JSON.parse(x.responseText); } catch (e) { body = null; }
        if (x.status >= 200 && x.status < 300) return resolve(body);
        var env = (body && body.error) || {};
        var e = new Error(env.message || "HTTP " + x.status);
        e.status = x.status; e.code = env.code || ""; e.details = env.details || [];
        reject(e);
      };
      x.onerror = function () { reject(new Error("the upload did not reach the server (connection lost): try again")); };
      x.send(file);
    });
  }

  var UPLOAD_MAX = 256 * 1048576; // server/imports.go's importUploadMax

  function mib(n) { return (n / 1048576).toFixed(n < 10485760 ? 1 : 0) + " MiB"; }

  TallySettings.register({ id: "imports", title: "Imports", section: "site", minRole: "admin", render: function (box, c) {
    var el = c.el;
    var site = "/sites/" + encodeURIComponent(c.site);
    box.appendChild(el("p", { class: "hint", text: "Bring a site's history from Plausible, Umami or GoatCounter. The file is checked whole first: a bad one is refused naming its line, and nothing is stored. Importing the same file again stores nothing twice." }));

    var sourceSel;
    var f = el("form", { id: "import-form", class: "stack" }, [
      c.field("Export from", "source", {}, function (a) {
        sourceSel = el("select", a, SOURCES.map(function (s) { return el("option", { value: s.id }, s.label); }));
        return sourceSel;
      }),
      c.field("File", "file", { type: "file", required: true, accept: SOURCES[0].accept }),
      el("button", { type: "submit" }, "Upload and import")]);
    var fileInput = f.elements.file;
    sourceSel.addEventListener("change", function () {
      fileInput.accept = SOURCES.filter(function (s) { return s.id === sourceSel.value; })[0].accept;
    });
    fileInput.addEventListener("change", function () {
      var g = fileInput.files[0] && guess(fileInput.files[0].name);
      if (g) sourceSel.value = g;
    });
    var bar = el("progress", { id: "import-progress", max: 1, value: 0, hidden: true, "aria-label": "Upload and import" });
    var note = el("p", { id: "import-status", role: "status" });
    var result = el("div", { id: "import-result" });

    c.form(f, function (v) {
      var file = fileInput.files[0];
      result.textContent = "";
      // The server's own bound (413 payload_too_large), said before a
      // byte is sent rather than after the browser sent 256 MiB.
      if (file.size > UPLOAD_MAX) {
        var e = new Error("the file is " + mib(file.size) + ", more than the " + mib(UPLOAD_MAX) + " an upload may be" +
          (v.source === "plausible" ? "" : ": tally import streams it without that bound"));
        e.code = "payload_too_large";
        throw e;
      }
      bar.hidden = false; bar.max = file.size || 1; bar.value = 0;
      note.textContent = "Uploading " + file.name + "…";
      var path = site + "/imports/" + encodeURIComponent(v.source) + "?file=" + encodeURIComponent(file.name);
      return upload(c, path, file, function (loaded, total) {
        bar.max = total || 1; bar.value = loaded;
        note.textContent = "Uploading " + file.name + ": " + mib(loaded) + " of " + mib(total);
      }, function () {
        // Uploaded: the server checks and stores it now; an indeterminate bar.
        bar.removeAttribute("value");
        note.textContent = "Uploaded; importing " + file.name + "…";
      }).then(function (a) {
        bar.max = 1; bar.value = 1;
        note.textContent = "Imported " + file.name + ".";
        result.appendChild(counts(a));
        f.reset();
        return history();
      }, function (e) {
        bar.hidden = true;
        note.textContent = "";
        throw e;
      });
    }, { invalid_import: "file", payload_too_large: "file", imports_busy: "file", unavailable: "file", not_found: "source" });
    box.appendChild(f);
    box.appendChild(bar);
    box.appendChild(note);
    box.appendChild(result);

    function counts(a) {
      var items = [["Source", a.source], ["Rows", a.rows]];
      if (a.imported != null && a.source !== "plausible") {
        items.push(["Imported", a.imported], ["Already there", a.duplicates], ["Skipped (bots)", a.skipped]);
      }
      items.push(["Took", (a.duration_ms / 1000).toFixed(1) + " s"]);
      return el("dl", { class: "counts", id: "import-counts" }, items.map(function (p) {
        return el("div", {}, [el("dt", { text: p[0] }), el("dd", { "data-count": p[0].toLowerCase(), text: String(p[1]) })]);
      }));
    }

    // files names an import's files, a zip's entries ("x.zip:y.csv") by the zip once.
    function files(list) {
      var seen = {};
      return list.map(function (n) { var m = /^(.*\.zip):/i.exec(n); return m ? m[1] : n; })
        .filter(function (n) { return seen[n] ? false : (seen[n] = true); }).join(", ");
    }

    // Past imports: the site.import entries of the workspace's audit log
    // (every source writes one; its newest 1,000 entries are read).
    box.appendChild(el("h3", { text: "Past imports" }));
    var past = box.appendChild(el("div", { id: "imports" }));
    function history() {
      return c.api("/workspaces/" + encodeURIComponent(c.workspace) + "/audit?limit=1000").then(function (b) {
        var rows = b.entries.filter(function (e) { return e.action === "site.import" && e.target === c.site; });
        past.textContent = "";
        past.appendChild(c.table([
          { head: "When", cell: function (e) { return c.when(e.ts); } },
          { head: "Source", cell: function (e) { return e.metadata.source; } },
          { head: "Files", cell: function (e) { return files(e.metadata.files || e.metadata.file_names || []); } },
          { head: "Rows", cell: function (e) { return String(e.metadata.rows); } },
          { head: "Imported", cell: function (e) {
            var m = e.metadata;
            if (m.first_day) return "days " + m.first_day + " to " + m.last_day;
            return m.imported != null ? m.imported + " new, " + m.duplicates + " already there" : "";
          } }], rows, "No imports yet."));
      });
    }
    return history();
  } });
})();
