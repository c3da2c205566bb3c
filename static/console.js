// Steward console: the few things htmx attributes do not say. No build, no framework.
(function () {
  "use strict";

  // Charts on the dashboard (uPlot), from the JSON the page carries. Each live refresh
  // swaps in new JSON (out of band); the same plots then take the new data, so nothing
  // on the page jumps and a reader's place is kept.
  var plots = {}, drawn = null;
  function chartData() {
    var data = document.getElementById("chart-data");
    return data && window.uPlot ? data.textContent : null;
  }
  function series(d) {
    return { "chart-throughput": [d.t, d.finished, d.failed, d.steps], "chart-latency": [d.t, d.p50, d.p95] };
  }
  function charts() {
    var text = chartData();
    if (text === null) return;
    drawn = text;
    var values = series(JSON.parse(text));
    var ink = "#5f6b7a", grid = "#eef1f5";
    // From zero to a little above the highest value: uPlot's own range around a single
    // point (one busy minute) spans thousands, which makes a 5 ms wait look like none.
    function fromZero(u, min, max) { return [0, max > 0 ? max * 1.15 : 1]; }
    var scales = { y: { range: fromZero }, steps: { range: fromZero } };
    function axes(label) {
      return [{ stroke: ink, grid: { stroke: grid } }, { stroke: ink, grid: { stroke: grid }, label: label, size: 50 }];
    }
    function draw(id, lines, label) {
      var el = document.getElementById(id);
      if (!el) return;
      el.innerHTML = "";
      var width = Math.max(el.clientWidth, 280);
      plots[id] = new uPlot({ width: width, height: 200, series: [{}].concat(lines), axes: axes(label), scales: scales,
                              legend: { show: true }, cursor: { drag: { x: false, y: false } } }, values[id], el);
    }
    draw("chart-throughput",
         [{ label: "finished", stroke: "#2b4f7e", width: 2, points: { show: true, size: 4 } }, { label: "failed", stroke: "#b4470c", width: 2 },
          { label: "steps", stroke: "#9aa7b6", width: 1, scale: "steps" }], "tasks / min");
    draw("chart-latency",
         [{ label: "p50 ms", stroke: "#2b4f7e", width: 2, spanGaps: true, points: { show: true, size: 4 } },
          { label: "p95 ms", stroke: "#6b8fc2", width: 1, dash: [4, 3], spanGaps: true }], "ms");
  }
  document.addEventListener("htmx:afterSettle", function () {
    var text = chartData();
    if (text === null || text === drawn) return;
    drawn = text;
    var values = series(JSON.parse(text));
    Object.keys(plots).forEach(function (id) { plots[id].setData(values[id]); });
  });

  // A live refresh morphs the server's HTML into the page (idiomorph), copying each
  // element's attributes from the server's. A <details> the reader opened or closed is
  // theirs: its `open` is never changed by a refresh (the server renders it as it first
  // shows it), so it stays as they left it, and nothing below it moves (closing one
  // above the reader's place scrolled what they read away). Text that did not change is
  // not touched by idiomorph, so a selection in it stays.
  if (window.Idiomorph) {
    var callbacks = window.Idiomorph.defaults.callbacks, attribute = callbacks.beforeAttributeUpdated;
    callbacks.beforeAttributeUpdated = function (name, node, mutation) {
      if (name === "open" && node.localName === "details") return false;
      return attribute(name, node, mutation);
    };
  }

  // A journal row recorded by an earlier attempt than the task's current one says
  // "replayed" (the page renders the mark hidden until then). Rows already on the page
  // when a new attempt starts learn it from the live part's epoch, as it refreshes.
  document.addEventListener("htmx:afterSettle", function () {
    var live = document.getElementById("task-live");
    var epoch = live ? Number(live.getAttribute("data-epoch")) : 0;
    if (!epoch) return;
    document.querySelectorAll("#step-rows tr[data-epoch]").forEach(function (row) {
      var mark = row.querySelector(".tag.replayed");
      if (mark) mark.hidden = !(Number(row.getAttribute("data-epoch")) < epoch);
    });
  });

  // Relative times in a <time data-ago> ("12.0 s ago", "in 4.0 s": the `ago_live` filter)
  // keep counting between refreshes: the dashboard's refresh answers 204 while nothing it
  // counts changed, and a heartbeat's age is not worth building it again for. Counted
  // against the server's clock (the live part's data-now, when it was built), so a skew
  // of the reader's clock does not show; written as the `seconds` filter writes them.
  var skew = 0;
  function words(value) {
    if (value < 1) return Math.round(value * 1000) + " ms";
    if (value < 60) return value.toFixed(1) + " s";
    if (value < 3600) return Math.floor(value / 60) + " min " + Math.floor(value % 60) + " s";
    if (value < 86400) return Math.floor(value / 3600) + " h " + Math.floor(value % 3600 / 60) + " min";
    return Math.floor(value / 86400) + " d " + Math.floor(value % 86400 / 3600) + " h";
  }
  function builtAt() {
    var now = document.querySelector("[data-now]");
    if (now) skew = Date.parse(now.getAttribute("data-now")) - Date.now();
  }
  function tick() {
    document.querySelectorAll("time[data-ago]").forEach(function (el) {
      var delta = (Date.now() + skew - Date.parse(el.getAttribute("datetime"))) / 1000;
      el.textContent = delta >= 0 ? words(delta) + " ago" : "in " + words(-delta);
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    builtAt();
    if (document.querySelector("[data-now]")) setInterval(tick, 1000);
  });
  document.addEventListener("htmx:afterSettle", builtAt);

  // Poll only a tab someone can see. htmx's own way, a filter on the trigger
  // (`every 2s [document.visibilityState === 'visible']`), is compiled with Function(),
  // which the Content-Security-Policy forbids (console/csp.py). A poll is the one request
  // htmx issues with no triggering event, from an element whose hx-trigger says `every`;
  // while the tab is hidden each is vetoed here, and the next tick after the tab shows
  // again goes ahead. A click on the same element (the journal's "newer steps") is never held.
  document.addEventListener("htmx:confirm", function (e) {
    if (e.detail.triggeringEvent || document.visibilityState === "visible") return;
    if (/(^|,)\s*every\s/.test(e.detail.elt.getAttribute("hx-trigger") || "")) e.preventDefault();
  });

  // A <select data-submit-on-change> submits its form when chosen from (the tenant
  // switcher); without script, the <noscript> button beside it does.
  document.addEventListener("change", function (e) {
    if (e.target.matches("select[data-submit-on-change]") && e.target.form) e.target.form.submit();
  });

  // The nav's "More" menu (a <details>, base.html) closes as menus do: on a click outside
  // it, and on Escape, which gives focus back to its summary.
  document.addEventListener("click", function (e) {
    document.querySelectorAll("details.more[open]").forEach(function (menu) {
      if (!menu.contains(e.target)) menu.open = false;
    });
  });
  document.addEventListener("keydown", function (e) {
    if (e.key !== "Escape") return;
    document.querySelectorAll("details.more[open]").forEach(function (menu) {
      menu.open = false;
      menu.querySelector("summary").focus();
    });
  });

  // Copy buttons (the token secret).
  document.addEventListener("click", function (e) {
    var target = e.target.closest("[data-copy]");
    if (!target) return;
    var source = document.querySelector(target.getAttribute("data-copy"));
    if (source && navigator.clipboard) {
      navigator.clipboard.writeText(source.textContent.trim());
      target.textContent = "Copied";
    }
  });

  // The one live region: say what a swap changed, without moving focus.
  document.addEventListener("htmx:afterSwap", function (e) {
    var region = document.getElementById("announce");
    var status = document.getElementById("task-status");
    if (region && status && e.detail.target && e.detail.target.id === "task-live") {
      var word = status.getAttribute("data-status");
      if (region.dataset.last !== word) { region.dataset.last = word; region.textContent = "Task is " + word; }
    }
    var panel = document.getElementById("stop-panel");
    if (region && panel && e.detail.target && e.detail.target.id === "stop-panel") {
      var said = panel.getAttribute("data-over") === "true" ? "Stop is over: " + panel.getAttribute("data-state")
        : "Stop: " + panel.getAttribute("data-acks") + " of " + panel.getAttribute("data-expected") + " acknowledged";
      if (region.dataset.stop !== said) { region.dataset.stop = said; region.textContent = said; }
    }
    // The inbox: its live bar says what the refresh brought (new requests, decided ones).
    var inbox = document.getElementById("approvals-live");
    if (region && inbox && e.detail.target && e.detail.target.id === "approvals-live") {
      var news = inbox.getAttribute("data-say");
      if (news && region.dataset.inbox !== news) { region.dataset.inbox = news; region.textContent = news; }
    }
    if (e.detail.target && e.detail.target.id === "verify-slot") {
      var result = document.getElementById("verify-result");
      if (result) result.focus();
    }
  });

  // Say that a swap target is being refreshed (screen readers), and stop saying it after.
  document.addEventListener("htmx:beforeRequest", function (e) {
    if (e.detail.target) e.detail.target.setAttribute("aria-busy", "true");
  });
  document.addEventListener("htmx:afterRequest", function (e) {
    if (e.detail.target) e.detail.target.removeAttribute("aria-busy");
  });

  document.addEventListener("DOMContentLoaded", charts);
})();
