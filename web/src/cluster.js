// The router's cluster view: GET /admin/cells every 250 ms (a kill -9'd cell shows dead as
// soon as the router's failure detector says so) and /metrics every second; events are the
// changes between two polls: a cell's state, its deaths, the router's migrations.
import { parsePrometheus, total, fmt } from "./common.js";

const $ = (id) => document.getElementById(id);
let known = null;          // url -> last description
let lastMigrations = null;
let lastRetries = null;

function event(text) {
  const li = document.createElement("li");
  li.textContent = `${new Date().toLocaleTimeString()} ${text}`;
  $("events").prepend(li);
  while ($("events").children.length > 200) $("events").lastChild.remove();
}

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  tr.append(td);
}

function render(cells) {
  const rows = cells.map((c) => {
    const tr = document.createElement("tr");
    tr.dataset.url = c.url;
    tr.dataset.state = c.state;
    cell(tr, c.url);
    cell(tr, c.state, "state state-" + c.state);
    cell(tr, fmt(c.running, 0));
    cell(tr, fmt(c.waiting, 0));
    cell(tr, c.kv_total_blocks > 0 ? `${fmt((100 * (c.kv_total_blocks - c.kv_free_blocks)) / c.kv_total_blocks)}%` : "–");
    cell(tr, fmt(c.tokens_per_second));
    cell(tr, fmt(c.outstanding_tokens, 0));
    cell(tr, c.heartbeat_age_ms === undefined ? "never" : `${fmt(c.heartbeat_age_ms / 1000, 1)} s`);
    cell(tr, fmt(c.deaths, 0));
    cell(tr, c.source);
    return tr;
  });
  $("cells").querySelector("tbody").replaceChildren(...rows);
  $("alive").textContent = cells.filter((c) => c.state === "alive").length;
  $("dead").textContent = cells.filter((c) => c.state === "dead").length;
}

function diff(cells) {
  const now = new Map(cells.map((c) => [c.url, c]));
  if (known) {
    for (const [url, c] of now) {
      const before = known.get(url);
      if (!before) event(`${url} joined (${c.source}), ${c.state}`);
      else if (before.state !== c.state) {
        const why = c.state === "dead" && c.last_detection_ms !== undefined
          ? ` (detected ${fmt(c.last_detection_ms, 0)} ms after its last heartbeat)` : "";
        event(`${url}: ${before.state} → ${c.state}${why}`);
      } else if (c.deaths > before.deaths) event(`${url} died and came back`);
    }
    for (const url of known.keys()) if (!now.has(url)) event(`${url} left`);
  }
  known = now;
}

async function pollCells() {
  try {
    const resp = await fetch("/admin/cells", { cache: "no-store" });
    if (!resp.ok) throw new Error(`/admin/cells answered ${resp.status}`);
    const j = await resp.json();
    diff(j.cells);
    render(j.cells);
    $("policy").textContent = j.policy;
    $("updated").textContent = "updated " + new Date().toLocaleTimeString();
    $("error").hidden = true;
  } catch (e) {
    $("error").textContent = "Cannot reach the router: " + (e.message || e);
    $("error").hidden = false;
  }
}

async function pollMetrics() {
  try {
    const resp = await fetch("/metrics", { cache: "no-store" });
    if (!resp.ok) return;
    const m = parsePrometheus(await resp.text());
    const migrations = total(m, "tokenhive_router_migrations_total");
    const retries = total(m, "tokenhive_router_retries_total");
    if (lastMigrations !== null && migrations > lastMigrations)
      event(`${migrations - lastMigrations} stream(s) migrated to another cell`);
    if (lastRetries !== null && retries > lastRetries) event(`${retries - lastRetries} request(s) retried on another cell`);
    lastMigrations = migrations;
    lastRetries = retries;
    $("migrations").textContent = fmt(migrations, 0);
    $("in-flight").textContent = fmt(total(m, "tokenhive_router_requests_in_flight"), 0);
  } catch (_) { /* the cells poll reports an unreachable router */ }
}

pollCells();
pollMetrics();
setInterval(pollCells, 250);
setInterval(pollMetrics, 1000);
