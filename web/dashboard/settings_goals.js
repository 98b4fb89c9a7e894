// Settings › Goals and Funnels of the picked site (docs/dashboard.md#settings):
// goals (a custom event, optionally with a property's value and a revenue
// currency, or a page path), the currency changed in place, and saved
// funnels, a name and 2 to 8 goals in order (docs/query-api.md#saved-funnels).
(function () {
  "use strict";

  // goalMatch describes what a goal counts.
  function goalMatch(g) {
    var m = g.event_name != null ? "event " + g.event_name : "page " + g.page_path;
    if (g.property) m += " where " + g.property.name + " = " + g.property.value;
    return m;
  }

  TallySettings.register({ id: "goals", title: "Goals", section: "site", minRole: "admin", render: function (box, c) {
    var el = c.el;
    var base = "/sites/" + encodeURIComponent(c.site);
    var list = box.appendChild(el("div", { id: "goal-list" }));

    function load() {
      return c.api(base + "/goals").then(function (b) {
        list.textContent = "";
        list.appendChild(c.table([
          { head: "Goal", cell: function (g) { return el("strong", { text: g.name }); } },
          { head: "Counts", cell: function (g) { return el("span", { class: "words", text: goalMatch(g) }); } },
          { head: "Revenue", cell: function (g) {
            if (g.event_name == null) return "—";
            // The one field a goal changes: its currency (PATCH).
            var f = el("form", { class: "inline", "data-goal": g.id }, [
              c.field("Currency", "currency", { value: g.currency || "", placeholder: "none", size: 5, maxlength: 3, autocomplete: "off" }),
              el("button", { type: "submit", class: "quiet" }, "Set")]);
            c.form(f, function (v) {
              var code = v.currency.trim();
              return c.api(base + "/goals/" + g.id, { method: "PATCH", body: { currency: code === "" ? null : code.toUpperCase() } }).then(function () {
                c.status("Currency of " + g.name + " saved.");
                return load();
              });
            }, { invalid_goal: "currency" });
            return f;
          } },
          { head: "", cell: function (g) {
            return el("button", { type: "button", class: "quiet danger-text", onclick: function () {
              c.confirm("Delete the goal " + g.name + "? Its figures go from the reports (the events stay).").then(function (ok) {
                if (!ok) return;
                return c.api(base + "/goals/" + g.id, { method: "DELETE" }).then(load);
              }).catch(function (e) { c.status(e.message); });
            } }, "Delete");
          } }], b.goals, "No goals yet: add one below."));
      });
    }

    box.appendChild(el("h3", { text: "New goal" }));
    var kind = el("select", { name: "kind", id: "goal-kind" }, [el("option", { value: "event" }, "Custom event"), el("option", { value: "page" }, "Pageview")]);
    var f = el("form", { class: "stack", id: "goal-create" }, [
      c.field("Name", "name", { required: true, autocomplete: "off", placeholder: "Signup" }),
      el("label", { class: "field", for: "goal-kind" }, [el("span", { class: "field-label", text: "Kind" }), kind]),
      c.field("Event name", "event_name", { autocomplete: "off", placeholder: "signup" }),
      c.field("Page path (* within a segment, ** across)", "page_path", { autocomplete: "off", placeholder: "/pricing" }),
      c.field("Property name (optional)", "property_name", { autocomplete: "off" }),
      c.field("Property value", "property_value", { autocomplete: "off" }),
      c.field("Currency of its revenue (optional, ISO 4217)", "currency", { autocomplete: "off", placeholder: "EUR", maxlength: 3 }),
      el("button", { type: "submit" }, "Add goal")]);
    function kindChanged() {
      var ev = kind.value === "event";
      ["event_name", "property_name", "property_value", "currency"].forEach(function (n) { f.elements[n].closest("label").hidden = !ev; });
      f.elements.page_path.closest("label").hidden = ev;
    }
    kind.onchange = kindChanged;
    kindChanged();
    c.form(f, function (v) {
      var body = { name: v.name };
      if (v.kind === "event") {
        body.event_name = v.event_name;
        if (v.property_name || v.property_value) body.property = { name: v.property_name, value: v.property_value };
        if (v.currency.trim()) body.currency = v.currency.trim().toUpperCase();
      } else {
        body.page_path = v.page_path;
      }
      return c.api(base + "/goals", { method: "POST", body: body }).then(function () {
        f.reset(); kindChanged();
        c.status("Goal added.");
        return load();
      });
    }, { goal_name_taken: "name", goal_limit_reached: "name" });
    box.appendChild(f);
    return load();
  } });

  TallySettings.register({ id: "funnels", title: "Funnels", section: "site", minRole: "admin", render: function (box, c) {
    var el = c.el;
    var base = "/sites/" + encodeURIComponent(c.site);
    var goals = [];
    var editing = null; // the funnel the form changes, null for a new one
    box.appendChild(el("p", { class: "empty", text: "A funnel counts the visitors who reach its goals in order within one visit; the dashboard's funnel panel lists the saved ones." }));
    var list = box.appendChild(el("div", { id: "funnel-list" }));
    var heading = el("h3", { text: "New funnel" });
    var steps = el("fieldset", { name: "steps", class: "steps-field" }, [el("legend", { text: "Steps, in order (2 to 8 goals)" })]);
    var add = el("button", { type: "button", class: "quiet", onclick: function () { stepSelect(""); } }, "Add a step");
    var cancel = el("button", { type: "button", class: "quiet", hidden: true, onclick: function () { edit(null); } }, "Cancel");
    var submit = el("button", { type: "submit" }, "Save funnel");
    var f = el("form", { class: "stack", id: "funnel-form" }, [
      c.field("Name", "name", { required: true, autocomplete: "off", placeholder: "Signup flow" }),
      steps, el("div", { class: "actions" }, [add, submit, cancel])]);

    function stepSelect(value) {
      if (steps.querySelectorAll("select").length >= 8) return;
      var n = steps.querySelectorAll("select").length + 1;
      var sel = el("select", { "data-step": "", "aria-label": "Step " + n }, [el("option", { value: "" }, "(no step)")].concat(goals.map(function (g) {
        return el("option", { value: String(g.id) }, g.name);
      })));
      sel.value = value;
      steps.appendChild(sel);
      add.hidden = n >= 8;
    }

    function edit(fn) {
      editing = fn;
      f.reset();
      [].slice.call(steps.querySelectorAll("select")).forEach(function (s) { s.remove(); });
      var ids = fn ? fn.steps.map(function (s) { return String(s.goal_id); }) : ["", ""];
      ids.forEach(stepSelect);
      f.elements.name.value = fn ? fn.name : "";
      heading.textContent = fn ? "Change the funnel " + fn.name : "New funnel";
      cancel.hidden = !fn;
    }

    function load() {
      return c.api(base + "/funnels").then(function (b) {
        list.textContent = "";
        list.appendChild(c.table([
          { head: "Funnel", cell: function (fn) { return el("strong", { text: fn.name }); } },
          { head: "Steps", cell: function (fn) { return el("span", { class: "words", text: fn.steps.map(function (s) { return s.name; }).join(" → ") }); } },
          { head: "", cell: function (fn) {
            return el("span", { class: "row-actions" }, [
              el("button", { type: "button", class: "quiet", onclick: function () { edit(fn); f.elements.name.focus(); } }, "Edit"),
              el("button", { type: "button", class: "quiet danger-text", onclick: function () {
                c.confirm("Delete the funnel " + fn.name + "?").then(function (ok) {
                  if (!ok) return;
                  return c.api(base + "/funnels/" + fn.id, { method: "DELETE" }).then(function () { if (editing && editing.id === fn.id) edit(null); return load(); });
                }).catch(function (e) { c.status(e.message); });
              } }, "Delete")]);
          } }], b.funnels, "No saved funnels yet."));
      });
    }

    c.form(f, function (v) {
      var ids = [].slice.call(steps.querySelectorAll("select")).map(function (s) { return s.value; }).filter(Boolean).map(Number);
      var body = { name: v.name, steps: ids };
      var req = editing ? c.api(base + "/funnels/" + editing.id, { method: "PATCH", body: body }) : c.api(base + "/funnels", { method: "POST", body: body });
      return req.then(function (fn) {
        c.status((editing ? "Saved the funnel " : "Added the funnel ") + fn.name + ".");
        edit(null);
        return load();
      });
    }, { funnel_name_taken: "name", funnel_limit_reached: "name" });

    return c.api(base + "/goals").then(function (b) {
      goals = b.goals || [];
      if (goals.length < 2) {
        box.appendChild(el("p", { class: "empty" }, ["A funnel needs two goals or more: ",
          el("a", { href: "?" + new URLSearchParams({ ws: c.workspace, site: c.site, page: "goals" }), onclick: function (ev) { ev.preventDefault(); c.go("goals"); } }, "add goals"), " first."]));
      } else {
        box.appendChild(heading);
        box.appendChild(f);
        edit(null);
      }
      return load();
    });
  } });
})();
