// Loads every page of a `verity report --html` dashboard in headless Chromium
// (puppeteer-core) and checks what a reader would: no console errors, no
// failed loads, every chart drawn with the ledger's points, hovering a ladder
// point names its change and bounds, clicking it opens the change's page,
// the filters hide what they should, every link resolves. Saves screenshots.
// Prints one summary line and exits 0 only if every check ran and passed.
//   node check.mjs DASHBOARD_DIR SCREENSHOT_DIR
import puppeteer from "puppeteer-core";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [dir, shots] = process.argv.slice(2);
if (!dir || !shots) { console.error("usage: node check.mjs DASHBOARD_DIR SCREENSHOT_DIR"); process.exit(2); }
const chromium = process.env.CHROMIUM || "/usr/bin/chromium";
if (!fs.existsSync(chromium)) { console.error(`dashboard-check: ${chromium} is missing: run scripts/setup.sh`); process.exit(1); }
fs.mkdirSync(shots, { recursive: true });

const failures = [];
function check(ok, what) { if (!ok) failures.push(what); return ok; }

const browser = await puppeteer.launch({ executablePath: chromium, headless: true,
                                         args: ["--no-sandbox", "--allow-file-access-from-files"] });
let consoleErrors = 0, pages = 0, points = 0, hovers = 0, clicks = 0, links = 0;
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1200, height: 900 });
  page.on("console", (m) => { if (m.type() === "error") { consoleErrors++; failures.push(`console error on ${page.url()}: ${m.text()}`); } });
  page.on("pageerror", (e) => { consoleErrors++; failures.push(`page error on ${page.url()}: ${e.message}`); });
  page.on("requestfailed", (r) => failures.push(`failed to load ${r.url()}`));
  const open = async (file) => {
    await page.goto(pathToFileURL(path.join(dir, file)).href, { waitUntil: "load" });
    await page.waitForSelector("body[data-ready='1']", { timeout: 10000 });
    pages++;
  };

  // The index: charts, points, links.
  await open("index.html");
  const summary = await page.evaluate(() => {
    const d = window.VERITY_DATA;
    return {
      ladders: d.ladders.length, series: d.series.length, changes: d.changes.length,
      charts: window.verityCharts.map((c) => ({ kind: c.kind, key: c.key, canvas: !!document.querySelector("#" + c.key + " canvas") })),
      drawn: window.verityCharts.filter((c) => c.kind === "ladder").map((c) => c.u.data.slice(2).flat().filter((v) => v !== null).length),
      expected: d.ladders.map((l) => l.slots.filter((s) => s.value !== null).length),
      rows: document.querySelectorAll("#changes tbody tr").length,
      hrefs: [...document.querySelectorAll("a[href]")].map((a) => a.getAttribute("href")),
    };
  });
  check(summary.charts.length === summary.ladders + summary.series, `charts: ${summary.charts.length} drawn, ${summary.ladders + summary.series} in the data`);
  check(summary.charts.every((c) => c.canvas), "a chart has no canvas");
  check(JSON.stringify(summary.drawn) === JSON.stringify(summary.expected), `ladder points drawn ${summary.drawn} against the data's ${summary.expected}`);
  points = summary.drawn.reduce((a, b) => a + b, 0);
  check(summary.rows === summary.changes, `changes table has ${summary.rows} rows for ${summary.changes} changes`);
  for (const h of summary.hrefs) {
    links++;
    check(fs.existsSync(path.join(dir, h.split("#")[0])), `link ${h} resolves to no file`);
  }
  await page.screenshot({ path: path.join(shots, "index.png"), fullPage: true });
  await page.screenshot({ path: path.join(shots, "index-top.png") });

  // Hover and click the first ladder point of every ladder that has one.
  const targets = await page.evaluate(() => window.verityCharts.filter((c) => c.kind === "ladder").map((c) => {
    const xs = c.u.data[0];
    for (let s = 2; s < c.u.data.length; s++)
      for (let i = 0; i < xs.length; i++)
        if (c.u.data[s][i] !== null) {
          const r = c.u.over.getBoundingClientRect();
          return { key: c.key, change: c.slots[i].change, x: r.left + c.u.valToPos(xs[i], "x"), y: r.top + c.u.valToPos(c.u.data[s][i], "y") };
        }
    return null;
  }).filter((t) => t !== null));
  for (const t of targets.slice(0, 3)) {
    await open("index.html");
    await page.evaluate((key) => document.getElementById(key).scrollIntoView(), t.key);
    const pos = await page.evaluate((key, change) => {
      const c = window.verityCharts.find((x) => x.key === key);
      const xs = c.u.data[0];
      for (let s = 2; s < c.u.data.length; s++)
        for (let i = 0; i < xs.length; i++)
          if (c.u.data[s][i] !== null && c.slots[i].change === change) {
            const r = c.u.over.getBoundingClientRect();
            return { x: r.left + c.u.valToPos(xs[i], "x"), y: r.top + c.u.valToPos(c.u.data[s][i], "y") };
          }
      return null;
    }, t.key, t.change);
    await page.mouse.move(pos.x, pos.y);
    const tip = await page.$eval("#tooltip", (e) => ({ text: e.textContent, shown: getComputedStyle(e).display !== "none" }));
    if (check(tip.shown && tip.text.includes("#" + t.change) && tip.text.includes("bounds"), `hovering ${t.key}'s point of #${t.change} showed "${tip.text}"`)) hovers++;
    if (hovers === 1) await page.screenshot({ path: path.join(shots, "hover.png") });
    await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.mouse.click(pos.x, pos.y)]);
    const h1 = await page.$eval("h1", (e) => e.textContent);
    if (check(page.url().endsWith(`change-${t.change}.html`) && h1.startsWith(`#${t.change} `), `clicking #${t.change} opened ${page.url()} ("${h1}")`)) clicks++;
  }
  check(targets.length === 0 || hovers > 0, "no ladder point could be hovered");

  // Filters: each verdict shows exactly its changes.
  await open("index.html");
  const states = await page.evaluate(() => [...new Set(window.VERITY_DATA.changes.map((c) => c.state))]);
  for (const s of states) {
    await page.select("#filter-verdict", s);
    const got = await page.evaluate((s) => ({
      shown: [...document.querySelectorAll("#changes tbody tr")].filter((tr) => tr.style.display !== "none").map((tr) => tr.getAttribute("data-state")),
      want: window.VERITY_DATA.changes.filter((c) => c.state === s).length,
    }), s);
    check(got.shown.length === got.want && got.shown.every((x) => x === s), `filter verdict=${s}: ${got.shown.length} rows shown, ${got.want} expected`);
  }
  await page.select("#filter-verdict", "");

  // Every change page.
  const files = fs.readdirSync(dir).filter((f) => /^change-\d+\.html$/.test(f)).sort();
  for (const f of files) {
    await open(f);
    const p = await page.evaluate(() => ({
      h1: document.querySelector("h1").textContent,
      runs: window.VERITY_RUNS.length,
      charts: window.verityCharts.length,
      withRounds: window.VERITY_RUNS.filter((r) => r.rounds.length > 0).length,
      back: !!document.querySelector("a[href='index.html']"),
    }));
    check(p.charts === p.withRounds, `${f}: ${p.charts} rounds charts for ${p.withRounds} runs with samples`);
    check(p.back, `${f}: no link back to the index`);
  }
  if (files.length) {
    await open(files[files.length - 1]);
    await page.screenshot({ path: path.join(shots, "change.png"), fullPage: true });
    await page.screenshot({ path: path.join(shots, "change-top.png") });
  }
  check(files.length > 0, "no change pages");
} finally {
  await browser.close();
}
for (const f of failures) console.error("dashboard-check: FAIL " + f);
console.log(`dashboard-check: ${pages} page loads, ${consoleErrors} console errors, ${points} ladder points, ` +
            `${hovers} hovers and ${clicks} clicks followed, ${links} links resolved, ${failures.length} failures`);
process.exit(failures.length === 0 && pages > 0 ? 0 : 1);
