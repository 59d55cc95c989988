// The web UI in a real browser: Debian's chromium, headless, driven by playwright-core, one
// launch for every page. Run by tests/integration/web_ui_test.cpp, which starts the servers:
//
//   node tests/browser/web_ui.mjs CONFIG.json
//   CONFIG: {"cell": URL (with --api-keys), "key": a key of it, "router": URL in front of
//            "cell" and "victim", "victim": URL, "victim_pid": PID, "binary": tokenhive,
//            "out": folder for screenshots, "chromium": path}
//
// Prints "ok   <what>" per check and "FAIL <what>: <why>" on the first failure (exit 1).
import { chromium } from "playwright-core";
import { readFileSync, mkdtempSync, rmSync, mkdirSync } from "node:fs";
import { spawn } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRequire } from "node:module";

const cfg = JSON.parse(readFileSync(process.argv[2], "utf8"));
const require = createRequire(import.meta.url);
const axeSource = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
mkdirSync(cfg.out, { recursive: true });

function ok(what) {
  console.log(`ok   ${what}`);
}
class Fail extends Error {}
function check(cond, what) {
  if (!cond) throw new Fail(what);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function metric(base, name, labels = "") {
  const text = await (await fetch(base + "/metrics")).text();
  let sum = 0;
  for (const line of text.split("\n"))
    if (line.startsWith(name + (labels ? "{" : "")) && line.includes(labels) && !line.startsWith("#"))
      sum += parseFloat(line.slice(line.lastIndexOf(" ") + 1));
  return sum;
}

// Every request a page makes must go to its own origin (the CSP says so; this checks it).
function watchOrigins(page, base) {
  const foreign = [];
  page.on("request", (r) => {
    if (!r.url().startsWith(base + "/")) foreign.push(r.url());
  });
  return foreign;
}

async function accessibility(page, name) {
  // Through the DevTools protocol, not a <script>: the page's CSP refuses inline scripts.
  await page.evaluate(axeSource);
  const result = await page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ["violations"] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.length }));
  });
  const serious = result.filter((v) => v.impact === "serious" || v.impact === "critical");
  check(serious.length === 0, `${name}: axe-core found serious violations: ${JSON.stringify(serious)}`);
  ok(`${name}: axe-core, no serious or critical violations (${result.length} minor)`);
}

async function cspHeader(base, path) {
  const resp = await fetch(base + path);
  const csp = resp.headers.get("content-security-policy") || "";
  check(csp.includes("default-src 'self'") && csp.includes("connect-src 'self'"),
        `${path}: Content-Security-Policy is "${csp}"`);
}

async function playground(ctx) {
  const page = await ctx.newPage();
  page.setDefaultTimeout(10000);
  const foreign = watchOrigins(page, cfg.cell);
  const consoleErrors = [];
  page.on("console", (m) => m.type() === "error" && consoleErrors.push(m.text()));
  await cspHeader(cfg.cell, "/");
  await page.goto(cfg.cell + "/");
  // --api-keys: the page asks for a key and keeps it in session storage only.
  await page.locator("#key-section").waitFor({ state: "visible", timeout: 5000 });
  await page.fill("#api-key", cfg.key);
  await page.click("#key-save");
  await page.locator("#model-name").filter({ hasText: "model:" }).waitFor({ timeout: 5000 });
  const stored = await page.evaluate(() => ({
    session: Object.values(sessionStorage).length,
    local: JSON.stringify(Object.assign({}, localStorage)),
  }));
  check(stored.session === 1 && !stored.local.includes(cfg.key), "the key is in session storage only");
  ok("playground: asks for the API key, keeps it in session storage only");
  await accessibility(page, "playground");

  // A chat: text appears piece by piece (counted by a MutationObserver), then the stats.
  await page.fill("#system", "You tell short stories.");
  await page.fill("#max_tokens", "48");
  await page.fill("#temperature", "0");
  await page.selectOption("#priority", "high");
  await page.evaluate(() => {
    window.__updates = 0;
    new MutationObserver(() => window.__updates++).observe(document.getElementById("conversation"),
      { subtree: true, characterData: true, childList: true });
  });
  await page.fill("#prompt", "Once upon a time");
  await page.click("#send");
  const answer = page.locator(".msg.assistant").last();
  await answer.locator("xpath=self::*[@data-done]").waitFor({ timeout: 20000 });
  const text = await answer.locator(".text").textContent();
  const stats = await answer.locator(".stats").textContent();
  const updates = await page.evaluate(() => window.__updates);
  check(text.length > 0, "the answer has text");
  // (stories260K writes 48 tokens in ~20 ms: they may come in a few reads; the stop check
  // below shows text arriving while a request runs.)
  check(updates >= 1, `the page updated (${updates})`);
  check(/TTFT \d+ ms/.test(stats) && /tokens\/s/.test(stats) && /finish: (length|stop)/.test(stats), `stats: ${stats}`);
  check(await page.locator("#error").isHidden(), "no error shown");
  ok(`playground: streamed answer (${updates} updates, "${text.slice(0, 40)}..."), ${stats}`);
  await page.screenshot({ path: join(cfg.out, "playground.png"), fullPage: true });

  // Stop: the fetch is aborted mid-stream and the server counts the request cancelled.
  const cancelledBefore = await metric(cfg.cell, "tokenhive_requests_total", 'outcome="cancelled"');
  await page.fill("#max_tokens", "4000");
  await page.check("#ignore_eos");
  await page.fill("#prompt", "Tell me a long story");
  // Stop is pressed inside the page as soon as the first text shows. 4,000 tokens take the
  // cell (--max-model-len 4096) seconds, so it is still generating when the connection closes
  // (1,500 took 0.3 s: a slow browser's press came after the server had finished).
  const pressed = page.evaluate(() => new Promise((resolve) => {
    const conv = document.getElementById("conversation");
    const obs = new MutationObserver(() => {
      const last = conv.querySelector(".msg.assistant:last-child .text");
      if (last && last.textContent.trim() && !document.getElementById("stop").disabled) {
        obs.disconnect();
        document.getElementById("stop").click();
        resolve(last.textContent.length);
      }
    });
    obs.observe(conv, { subtree: true, characterData: true, childList: true });
  }));
  await page.click("#send");
  const shownAtStop = await pressed;
  const long = page.locator(".msg.assistant").last();
  await long.locator("xpath=self::*[@data-done]").waitFor({ timeout: 5000 });
  const stopStats = await long.locator(".stats").textContent();
  check(stopStats.includes("finish: stopped"), `stopped answer stats: ${stopStats}`);
  check(shownAtStop > 0 && !/4000 tokens/.test(stopStats), `text shown while streaming, stopped before the end: ${stopStats}`);
  let cancelled = cancelledBefore;
  for (let i = 0; i < 50 && cancelled === cancelledBefore; i++) {
    await sleep(100);
    cancelled = await metric(cfg.cell, "tokenhive_requests_total", 'outcome="cancelled"');
  }
  check(cancelled === cancelledBefore + 1, `cancelled requests on the server: ${cancelledBefore} -> ${cancelled}`);
  ok(`playground: stop cancels the request on the server (tokenhive_requests_total{outcome="cancelled"} ${cancelledBefore} -> ${cancelled}; ${shownAtStop} characters shown at the press; ${stopStats})`);

  // An API error is shown as the API said it.
  await page.fill("#max_tokens", "-3");
  await page.uncheck("#ignore_eos");
  await page.fill("#prompt", "hello");
  await page.click("#send");
  await page.locator("#error").waitFor({ state: "visible", timeout: 5000 });
  const err = await page.locator("#error").textContent();
  check(/^400: .*max_tokens/.test(err), `error shown: ${err}`);
  ok(`playground: API errors shown plainly ("${err.slice(0, 80)}")`);

  // The conversation stays in the browser across a reload.
  const before = await page.locator(".msg").count();
  await page.reload();
  await page.locator(".msg").nth(before - 1).waitFor({ timeout: 5000 });
  check((await page.locator(".msg").count()) === before, "conversation kept across a reload");
  ok(`playground: the conversation (${before} messages) is kept across a reload`);
  check(foreign.length === 0, `requests to other origins: ${foreign}`);
  check(consoleErrors.every((e) => /40[01]/.test(e)), `console errors: ${consoleErrors}`);
  await page.close();
}

async function dashboard(ctx) {
  const page = await ctx.newPage();
  const foreign = watchOrigins(page, cfg.cell);
  await cspHeader(cfg.cell, "/dashboard");
  await page.goto(cfg.cell + "/dashboard");
  await page.locator("#updated").filter({ hasText: "updated" }).waitFor({ timeout: 5000 });
  const total0 = parseFloat(await page.locator("#tokens-total").textContent());
  // Load: tokenhive bench serve, 4 at a time for 2 s.
  const bench = spawn(cfg.binary, ["bench", "serve", "--url", cfg.cell, "--endpoint", "/v1/completions",
    "--dataset-name", "random", "--random-input-len", "32", "--random-output-len", "64", "--num-prompts", "400",
    "--duration", "2", "--max-concurrency", "4", "--request-rate", "inf", "--no-progress"],
    { env: { ...process.env, OPENAI_API_KEY: cfg.key }, stdio: ["ignore", "ignore", "pipe"] });
  let benchErr = "";
  bench.stderr.on("data", (d) => (benchErr += d));
  const benchDone = new Promise((r) => bench.on("exit", r));
  let tps = NaN, running = 0;
  for (let i = 0; i < 40; i++) {
    await sleep(100);
    tps = parseFloat(await page.locator("#tps").textContent());
    running = Math.max(running, parseFloat(await page.locator("#running").textContent()) || 0);
    if (tps > 0 && running > 0 && i >= 10) break;
  }
  await page.screenshot({ path: join(cfg.out, "dashboard.png"), fullPage: true });
  const code = await benchDone;
  check(code === 0, `bench serve exited ${code}: ${benchErr}`);
  await sleep(1200);  // the page's next poll after the last request
  const total1 = parseFloat(await page.locator("#tokens-total").textContent());
  const ttft = await page.locator("#ttft-p50").textContent();
  const byPriority = await page.locator("#by-priority tbody tr").count();
  const tenants = await page.locator("#tenants tbody tr").count();
  check(tps > 0, `tokens/s under load: ${tps}`);
  check(total1 > total0, `tokens generated, total: ${total0} -> ${total1}`);
  check(/ms|s$/.test(ttft), `TTFT p50: ${ttft}`);
  check(byPriority > 0 && tenants > 0, `rows by priority ${byPriority}, tenants ${tenants}`);
  ok(`dashboard: under bench serve load ${tps} tokens/s, running up to ${running}, tokens ${total0} -> ${total1}, TTFT p50 ${ttft}, ${byPriority} priority rows, ${tenants} tenant rows`);
  await accessibility(page, "dashboard");
  check(foreign.length === 0, `requests to other origins: ${foreign}`);
  await page.close();
}

async function cluster(ctx) {
  const page = await ctx.newPage();
  const foreign = watchOrigins(page, cfg.router);
  await cspHeader(cfg.router, "/");
  await page.goto(cfg.router + "/");
  const row = (url) => page.locator(`#cells tbody tr[data-url="${url}"]`);
  await row(cfg.victim).and(page.locator('[data-state="alive"]')).waitFor({ timeout: 5000 });
  await row(cfg.cell).and(page.locator('[data-state="alive"]')).waitFor({ timeout: 5000 });
  ok("cluster view: both cells alive");
  await accessibility(page, "cluster view");
  process.kill(cfg.victim_pid, "SIGKILL");
  const t0 = Date.now();
  await row(cfg.victim).and(page.locator('[data-state="dead"]')).waitFor({ timeout: 3000 });
  const ms = Date.now() - t0;
  await page.locator("#events li").filter({ hasText: "→ dead" }).waitFor({ timeout: 1000 });
  await page.screenshot({ path: join(cfg.out, "cluster.png"), fullPage: true });
  check(ms < 1000, `dead shown ${ms} ms after kill -9`);
  ok(`cluster view: the cell shows dead ${ms} ms after kill -9, with an event`);
  check(foreign.length === 0, `requests to other origins: ${foreign}`);
  await page.close();
}

// The dashboard's arithmetic on a page of known values: the parser (escapes, +Inf) and the
// quantile, worked by hand as Prometheus' histogram_quantile does it.
async function dashboardArithmetic() {
  const { parsePrometheus, buckets, quantile, total } = await import("../../web/src/common.js");
  const m = parsePrometheus([
    "# HELP h a histogram", "# TYPE h histogram",
    'h_bucket{le="0.1"} 10', 'h_bucket{le="0.2"} 30', 'h_bucket{le="+Inf"} 40', "h_count 40",
    'c{tenant="a \\\"b\\\" c",outcome="stop"} 3', 'c{tenant="x",outcome="stop"} 4.5',
  ].join("\n"));
  check(total(m, "c") === 7.5 && total(m, "c", { tenant: 'a "b" c' }) === 3, "label escapes parsed");
  // p50: rank 20 of 40 lies in (0.1, 0.2] holding 20, 10 below: 0.1 + 0.1 * (10 / 20) = 0.15.
  const q50 = quantile(0.5, buckets(m, "h"));
  // p90: rank 36 falls in +Inf: the highest finite bound, 0.2.
  const q90 = quantile(0.9, buckets(m, "h"));
  const before = new Map([["0.1", 10], ["0.2", 10], ["+Inf", 10]]);
  // Since `before`: 0, 20, 30 -> p50 rank 15 in (0.1, 0.2]: 0.1 + 0.1 * 15/20 = 0.175.
  const q50since = quantile(0.5, buckets(m, "h"), before);
  check(Math.abs(q50 - 0.15) < 1e-12 && q90 === 0.2 && Math.abs(q50since - 0.175) < 1e-12,
        `quantiles ${q50} ${q90} ${q50since}`);
  check(Number.isNaN(quantile(0.5, buckets(m, "h"), buckets(m, "h"))), "no observations: NaN");
  ok("dashboard arithmetic: Prometheus text parsed, quantiles as histogram_quantile");
}

const profile = mkdtempSync(join(tmpdir(), "tokenhive-chromium-"));
let ctx;
let code = 0;
try {
  // A fresh profile, nothing the browser would fetch by itself, never a download.
  ctx = await chromium.launchPersistentContext(profile, {
    executablePath: cfg.chromium,
    headless: true,
    // --disable-dev-shm-usage: CI containers often give /dev/shm 64 MB, too little for chromium.
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-dev-shm-usage",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: { width: 1280, height: 900 },
  });
  await dashboardArithmetic();
  await playground(ctx);
  await dashboard(ctx);
  await cluster(ctx);
  console.log(`screenshots in ${cfg.out}`);
} catch (e) {
  console.log(`FAIL ${e instanceof Fail ? e.message : e.stack || e}`);
  code = 1;
} finally {
  if (ctx) await ctx.close();
  rmSync(profile, { recursive: true, force: true });
}
process.exit(code);
