// The cell's dashboard: GET /metrics every second, parsed here (Prometheus text), kept for
// 5 minutes; rates and percentiles are differences between two kept snapshots, the way
// PromQL's rate() and histogram_quantile() compute them.
import { parsePrometheus, total, buckets, quantile, fmt, fmtSeconds, drawChart } from "./common.js";

const $ = (id) => document.getElementById(id);
const SPAN = 300;        // seconds kept and charted
const RATE_SPAN = 5;     // seconds a "now" rate is taken over
const history = [];      // [{t, m}] oldest first

function at(secondsAgo) {
  const t = Date.now() / 1000 - secondsAgo;
  for (const h of history) if (h.t >= t) return h;
  return history[0];
}

function rate(name, match, span) {
  const now = history[history.length - 1], then = at(span);
  if (!now || now === then) return NaN;
  return (total(now.m, name, match) - total(then.m, name, match)) / (now.t - then.t);
}

function setText(id, text) {
  const el = $(id);
  if (el && el.textContent !== text) el.textContent = text;
}

function labelValues(m, name, label) {
  const s = new Set();
  for (const x of m.get(name) || []) s.add(x.labels[label]);
  return [...s].sort();
}

function fillTable(id, rows) {
  const body = $(id).querySelector("tbody");
  body.replaceChildren(...rows.map((cells) => {
    const tr = document.createElement("tr");
    for (const c of cells) {
      const td = document.createElement("td");
      td.textContent = c;
      tr.append(td);
    }
    return tr;
  }));
}

function latency(prefix, family, now, then) {
  const b = buckets(now.m, family), a = buckets(then.m, family);
  for (const q of [50, 90, 99]) setText(`${prefix}-p${q}`, fmtSeconds(quantile(q / 100, b, a)));
  setText(`${prefix}-n`, fmt(total(now.m, family + "_count") - total(then.m, family + "_count"), 0));
}

function update() {
  const now = history[history.length - 1], first = history[0];
  const m = now.m;
  setText("tps", fmt(rate("tokenhive_engine_tokens_generated_total", {}, RATE_SPAN)));
  setText("rps", fmt(rate("tokenhive_requests_total", {}, RATE_SPAN), 2));
  setText("running", fmt(total(m, "tokenhive_requests_running"), 0));
  setText("waiting", fmt(total(m, "tokenhive_requests_waiting"), 0));
  setText("swapped", fmt(total(m, "tokenhive_requests_swapped"), 0));
  for (const tier of ["primary", "host"]) {
    const cap = total(m, "tokenhive_kv_blocks_capacity", { tier });
    setText(`kv-${tier}`, cap > 0 ? `${fmt(100 * total(m, "tokenhive_kv_usage_ratio", { tier }))}%` : "none");
  }
  const prompt = total(m, "tokenhive_prompt_tokens_total") - total(first.m, "tokenhive_prompt_tokens_total");
  const hit = total(m, "tokenhive_prefix_cache_hit_tokens_total") - total(first.m, "tokenhive_prefix_cache_hit_tokens_total");
  setText("prefix-hit", prompt > 0 ? `${fmt((100 * hit) / prompt)}%` : "–");
  setText("tokens-total", fmt(total(m, "tokenhive_engine_tokens_generated_total"), 0));
  const minutes = Math.max(1, Math.round((now.t - first.t) / 60));
  setText("window", now.t - first.t < SPAN - 1 ? `${fmt(now.t - first.t, 0)} s (since this page opened)` : `${minutes} minutes`);

  latency("ttft", "tokenhive_time_to_first_token_seconds", now, first);
  latency("tpot", "tokenhive_time_per_output_token_seconds", now, first);
  latency("queue", "tokenhive_request_queue_time_seconds", now, first);

  const windowed = (name, match) => total(m, name, match) - total(first.m, name, match);
  fillTable("outcomes", labelValues(m, "tokenhive_requests_total", "outcome").map((o) => [
    o, fmt(windowed("tokenhive_requests_total", { outcome: o }), 0), fmt(total(m, "tokenhive_requests_total", { outcome: o }), 0)]));
  fillTable("rejected", labelValues(m, "tokenhive_requests_rejected_total", "reason").map((r) => [
    r, fmt(windowed("tokenhive_requests_rejected_total", { reason: r }), 0), fmt(total(m, "tokenhive_requests_rejected_total", { reason: r }), 0)]));
  const calls = "tokenhive_calls_total";
  const pri = [];
  for (const p of labelValues(m, calls, "priority"))
    for (const o of labelValues(m, calls, "outcome")) {
      const n = total(m, calls, { priority: p, outcome: o });
      if (n > 0) pri.push([p, o, fmt(windowed(calls, { priority: p, outcome: o }), 0), fmt(n, 0)]);
    }
  fillTable("by-priority", pri);
  const tenants = labelValues(m, calls, "tenant").filter((t) => t);
  $("tenants-panel").hidden = tenants.length === 0;
  fillTable("tenants", tenants.map((t) => [
    t, fmt(rate(calls, { tenant: t }, 60), 2), fmt(rate("tokenhive_tenant_tokens_total", { tenant: t }, 60)), fmt(total(m, calls, { tenant: t }), 0)]));

  // Charts: per kept snapshot, its rate over the previous 5 s / its 10-s percentiles.
  const series = (f) => history.map((h, i) => {
    let j = i;
    while (j > 0 && h.t - history[j].t < RATE_SPAN) j--;
    return [h.t, j === i ? NaN : f(h, history[j])];
  });
  const counterRate = (name) => (h, p) => (total(h.m, name) - total(p.m, name)) / (h.t - p.t);
  const q = (family, qq) => (h, p) => quantile(qq, buckets(h.m, family), buckets(p.m, family));
  drawChart($("chart-tps"), [{ name: "tokens/s", points: series(counterRate("tokenhive_engine_tokens_generated_total")) }], SPAN);
  drawChart($("chart-lat"), [
    { name: "TTFT p50", points: series(q("tokenhive_time_to_first_token_seconds", 0.5)) },
    { name: "TTFT p99", points: series(q("tokenhive_time_to_first_token_seconds", 0.99)) },
    { name: "TPOT p50", points: series(q("tokenhive_time_per_output_token_seconds", 0.5)) },
  ], SPAN, "s");
  drawChart($("chart-queue"), [
    { name: "running", points: history.map((h) => [h.t, total(h.m, "tokenhive_requests_running")]) },
    { name: "waiting", points: history.map((h) => [h.t, total(h.m, "tokenhive_requests_waiting")]) },
  ], SPAN);
  drawChart($("chart-kv"), ["primary", "host"].map((tier) => ({
    name: tier, points: history.map((h) => [h.t, 100 * total(h.m, "tokenhive_kv_usage_ratio", { tier })]) })), SPAN, "%");
}

async function poll() {
  try {
    const resp = await fetch("/metrics", { cache: "no-store" });
    if (!resp.ok) throw new Error(`/metrics answered ${resp.status}`);
    const m = parsePrometheus(await resp.text());
    const t = Date.now() / 1000;
    history.push({ t, m });
    while (history.length > 2 && t - history[1].t > SPAN) history.shift();
    $("error").hidden = true;
    update();
    setText("updated", "updated " + new Date().toLocaleTimeString());
  } catch (e) {
    $("error").textContent = "Cannot read /metrics: " + (e.message || e);
    $("error").hidden = false;
  }
}

poll();
setInterval(poll, 1000);
