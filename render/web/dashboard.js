// The dashboard's index page: the ledger's ladders and drift series drawn
// with uPlot from window.VERITY_DATA (data.js, written by `verity report
// --html`), the changes table, and the filters over both. No server: every
// file is loaded from the directory it was written into.
"use strict";

(function () {
  const data = window.VERITY_DATA;
  const byId = new Map(data.changes.map((c) => [c.id, c]));
  const marks = ["accepted", "parked", "not-banked", "rejected-parity"];
  const markColors = { accepted: "#1a7f37", parked: "#9a6700", "not-banked": "#8250df", "rejected-parity": "#cf222e" };
  const filters = { verdict: "", author: "", workload: "" };
  window.verityCharts = [];  // [{kind, key, u, slots}]: what the browser test inspects

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function pct(v) { return v === null || v === undefined ? "—" : (v >= 0 ? "+" : "") + (100 * v).toFixed(2) + "%"; }
  function bounds(c) { return c.ci_low === null && c.ci_high === null ? "—" : pct(c.ci_low) + " .. " + pct(c.ci_high); }

  function passes(c) {
    if (!c) return false;
    if (filters.verdict && c.state !== filters.verdict) return false;
    if (filters.author && c.author !== filters.author) return false;
    if (filters.workload && !c.workloads.includes(filters.workload)) return false;
    return true;
  }

  // One select per filter, its options the values the ledger holds.
  function buildFilters() {
    const bar = document.getElementById("filters");
    const values = {
      verdict: [...new Set(data.changes.map((c) => c.state))].sort(),
      author: [...new Set(data.changes.map((c) => c.author))].sort(),
      workload: [...new Set(data.changes.flatMap((c) => c.workloads))].sort(),
    };
    for (const name of Object.keys(filters)) {
      const label = el("label", {}, name + " ");
      const sel = el("select", { id: "filter-" + name });
      sel.appendChild(el("option", { value: "" }, "all"));
      for (const v of values[name]) sel.appendChild(el("option", { value: v }, v === "" ? "(unnamed)" : v));
      sel.addEventListener("change", () => { filters[name] = sel.value; refresh(); });
      label.appendChild(sel);
      bar.appendChild(label);
    }
  }

  // The hover box: the change, its verdict, gain and bounds.
  const tip = el("div", { id: "tooltip", class: "tooltip" });
  document.body.appendChild(tip);
  function showTip(u, slot, left, top) {
    const c = byId.get(slot.change);
    if (!c) { tip.style.display = "none"; return; }
    tip.textContent = "";
    tip.appendChild(el("b", {}, "#" + c.id + " "));
    tip.appendChild(document.createTextNode(c.title));
    tip.appendChild(el("br"));
    tip.appendChild(document.createTextNode(c.state + " · gain " + pct(slot.gain) + " · bounds " + slot.bounds + " · run " + slot.run));
    const r = u.over.getBoundingClientRect();
    tip.style.left = window.scrollX + r.left + left + 12 + "px";
    tip.style.top = window.scrollY + r.top + top + 12 + "px";
    tip.style.display = "block";
  }

  function ladderData(l) {
    const xs = l.slots.map((_, i) => i);
    const frontier = l.slots.map((s) => s.frontier);
    const series = marks.map((m) => l.slots.map((s) => (s.mark === m && s.value !== null && passes(byId.get(s.change)) ? s.value : null)));
    return [xs, frontier, ...series];
  }

  const wholeSteps = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000];

  // The gate band on the better side of the frontier: an attempt must land
  // beyond it to be banked.
  function drawGateBand(u, l) {
    const ctx = u.ctx;
    ctx.save();
    ctx.fillStyle = "rgba(26, 127, 55, 0.10)";
    l.slots.forEach((s, i) => {
      if (s.frontier === null) return;
      const edge = l.higher ? s.frontier * (1 + l.gate_frac) : s.frontier / (1 + l.gate_frac);
      const x0 = u.valToPos(i, "x", true), x1 = i + 1 < l.slots.length ? u.valToPos(i + 1, "x", true) : u.bbox.left + u.bbox.width;
      const y0 = u.valToPos(s.frontier, "y", true), y1 = u.valToPos(edge, "y", true);
      ctx.fillRect(x0, Math.min(y0, y1), x1 - x0, Math.abs(y1 - y0));
    });
    ctx.restore();
  }

  function ladderChart(l, host) {
    const width = Math.min(960, host.clientWidth || 960);
    const opts = {
      title: l.metric + " frontier ladder",
      width, height: 300,
      scales: { x: { time: false } },
      axes: [{ label: "attempt (recording order), by change", incrs: wholeSteps,
               values: (u, splits) => splits.map((i) => (l.slots[i] ? "#" + l.slots[i].change : "")) },
             { label: l.unit || l.metric }],
      series: [
        { label: "attempt", value: (u, v) => (v === null || !l.slots[v] ? "" : "#" + l.slots[v].change) },
        { label: "frontier", stroke: "#57606a", width: 2, paths: uPlot.paths.stepped({ align: 1 }), points: { show: false } },
        // Banked and refused-for-parity attempts filled, parked and not banked hollow (as the SVG ladder draws them).
        ...marks.map((m) => ({ label: m, stroke: markColors[m], paths: () => null,
                               points: { show: true, size: 9, width: 2, fill: m === "accepted" || m === "rejected-parity" ? markColors[m] : "#fff" } })),
      ],
      cursor: { drag: { x: false, y: false } },
      hooks: {
        drawClear: [(u) => drawGateBand(u, l)],
        setCursor: [(u) => {
          const i = u.cursor.idx;
          if (i === null || i === undefined || !l.slots[i] || !passes(byId.get(l.slots[i].change))) { tip.style.display = "none"; return; }
          showTip(u, l.slots[i], u.cursor.left, u.cursor.top);
        }],
      },
    };
    const u = new uPlot(opts, ladderData(l), host);
    u.over.addEventListener("click", () => {
      const i = u.cursor.idx;
      if (i !== null && i !== undefined && l.slots[i] && passes(byId.get(l.slots[i].change))) window.location.href = "change-" + l.slots[i].change + ".html";
    });
    u.over.addEventListener("mouseleave", () => { tip.style.display = "none"; });
    return u;
  }

  function seriesChart(s, host) {
    const xs = s.points.map((_, i) => i);
    const ys = s.points.map((p) => p.value);
    const opts = {
      title: s.metric + " measured on main",
      width: Math.min(960, host.clientWidth || 960), height: 260,
      scales: { x: { time: false } },
      axes: [{ label: "measurement (recording order)", incrs: wholeSteps }, { label: s.unit || s.metric }],
      series: [{ label: "point" }, { label: "median", stroke: "#0969da", width: 1.5, points: { show: true, size: 6 } }],
      hooks: {
        // Each change point as a dashed vertical line before its first point.
        draw: [(u) => {
          const ctx = u.ctx;
          ctx.save();
          ctx.strokeStyle = "#cf222e";
          ctx.setLineDash([6, 4]);
          for (const b of s.breaks) {
            const x = u.valToPos(b.index - 0.5, "x", true);
            ctx.beginPath(); ctx.moveTo(x, u.bbox.top); ctx.lineTo(x, u.bbox.top + u.bbox.height); ctx.stroke();
          }
          ctx.restore();
        }],
        setCursor: [(u) => {
          const i = u.cursor.idx;
          const p = i === null || i === undefined ? null : s.points[i];
          if (!p) { tip.style.display = "none"; return; }
          const c = byId.get(p.change);
          tip.textContent = "run " + p.run + (c ? " · #" + c.id + " " + c.title : "") + " · " + p.value.toPrecision(6) + (p.head ? " (head)" : " (base)");
          const r = u.over.getBoundingClientRect();
          tip.style.left = window.scrollX + r.left + u.cursor.left + 12 + "px";
          tip.style.top = window.scrollY + r.top + u.cursor.top + 12 + "px";
          tip.style.display = "block";
        }],
      },
    };
    const u = new uPlot(opts, [xs, ys], host);
    u.over.addEventListener("click", () => {
      const i = u.cursor.idx;
      const p = i === null || i === undefined ? null : s.points[i];
      if (p && byId.get(p.change)) window.location.href = "change-" + p.change + ".html";
    });
    u.over.addEventListener("mouseleave", () => { tip.style.display = "none"; });
    return u;
  }

  function buildCharts() {
    const root = document.getElementById("charts");
    data.ladders.forEach((l, k) => {
      const box = el("section", { class: "chart", id: "ladder-" + k, "data-workload": l.workload });
      box.appendChild(el("h3", {}, l.metric + " · box " + l.box + (l.workload ? " · " + l.workload : "")));
      const host = el("div", { class: "plot" });
      box.appendChild(host);
      root.appendChild(box);
      window.verityCharts.push({ kind: "ladder", key: "ladder-" + k, u: ladderChart(l, host), slots: l.slots });
    });
    const drift = document.getElementById("drift");
    data.series.forEach((s, k) => {
      const box = el("section", { class: "chart", id: "series-" + k, "data-workload": s.workload });
      box.appendChild(el("h3", {}, s.metric + " · box " + s.box + (s.workload ? " · " + s.workload : "") + " · " + s.breaks.length + " change point(s)"));
      const host = el("div", { class: "plot" });
      box.appendChild(host);
      drift.appendChild(box);
      window.verityCharts.push({ kind: "series", key: "series-" + k, u: seriesChart(s, host), points: s.points });
    });
  }

  function buildTable() {
    const body = document.querySelector("#changes tbody");
    for (const c of data.changes) {
      const tr = el("tr", { "data-id": String(c.id), "data-state": c.state });
      const link = el("a", { href: "change-" + c.id + ".html" }, "#" + c.id);
      const first = el("td");
      first.appendChild(link);
      tr.appendChild(first);
      for (const v of [c.title, c.kind, c.author, c.workloads.join(", "), c.state, pct(c.gain), bounds(c),
                       c.predict_pct === null ? "—" : (c.predict_pct >= 0 ? "+" : "") + c.predict_pct.toFixed(2) + "%",
                       c.surprise ? "yes" : ""])
        tr.appendChild(el("td", {}, v));
      body.appendChild(tr);
    }
  }

  function refresh() {
    let shown = 0;
    for (const tr of document.querySelectorAll("#changes tbody tr")) {
      const ok = passes(byId.get(Number(tr.getAttribute("data-id"))));
      tr.style.display = ok ? "" : "none";
      if (ok) shown++;
    }
    document.getElementById("shown").textContent = shown + " of " + data.changes.length + " changes shown";
    for (const ch of window.verityCharts) {
      if (ch.kind === "ladder") ch.u.setData(ladderData(data.ladders[Number(ch.key.slice(7))]));
      const section = document.getElementById(ch.key);
      section.style.display = filters.workload && section.getAttribute("data-workload") !== filters.workload ? "none" : "";
    }
  }

  buildFilters();
  buildCharts();
  buildTable();
  refresh();
  document.body.setAttribute("data-ready", "1");
})();
