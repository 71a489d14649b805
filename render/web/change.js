// A change's page: each run's samples by round (base and head, the warm-up
// round 0 included and marked), drawn with uPlot from window.VERITY_RUNS,
// which the page itself carries.
"use strict";

(function () {
  window.verityCharts = [];
  for (const run of window.VERITY_RUNS) {
    const host = document.getElementById("rounds-" + run.run);
    if (!host || run.rounds.length === 0) continue;
    const xs = run.rounds.map((r) => r.round);
    const mean = (v) => (v.length ? v.reduce((a, b) => a + b, 0) / v.length : null);
    const u = new uPlot({
      title: "run " + run.run + ": samples by round (round 0 is the warm-up, not scored)",
      width: Math.min(900, host.clientWidth || 900), height: 240,
      scales: { x: { time: false } },
      axes: [{ label: "round" }, { label: run.metric }],
      series: [
        { label: "round" },
        { label: "base", stroke: "#57606a", width: 1.5, points: { show: true, size: 6 } },
        { label: "head", stroke: "#0969da", width: 1.5, points: { show: true, size: 6 } },
      ],
    }, [xs, run.rounds.map((r) => mean(r.base)), run.rounds.map((r) => mean(r.head))], host);
    window.verityCharts.push({ kind: "rounds", key: "rounds-" + run.run, u });
  }
  document.body.setAttribute("data-ready", "1");
})();
