// What the pages share: the API key (session storage only), fetch with it, the Prometheus
// text parser, histogram quantiles and a small line chart drawn on a canvas.

const KEY = "tokenhive.apiKey";

export function apiKey() {
  return sessionStorage.getItem(KEY) || "";
}

export function setApiKey(k) {
  if (k) sessionStorage.setItem(KEY, k);
  else sessionStorage.removeItem(KEY);
}

/// fetch(path) with the session's key as a Bearer token when there is one.
export function apiFetch(path, init = {}) {
  const headers = new Headers(init.headers || {});
  const k = apiKey();
  if (k) headers.set("Authorization", "Bearer " + k);
  return fetch(path, { ...init, headers });
}

/// The message of an error answer: OpenAI's {"error": {"message"}} or the raw text.
export async function errorText(resp) {
  const text = await resp.text();
  try {
    const j = JSON.parse(text);
    if (j && j.error && j.error.message) return `${resp.status}: ${j.error.message}`;
  } catch (_) { /* not JSON: shown as sent */ }
  return `${resp.status} ${resp.statusText}: ${text.slice(0, 500)}`;
}

/// Prometheus text format 0.0.4 -> Map(name -> [{labels, value}]).
export function parsePrometheus(text) {
  const out = new Map();
  for (const line of text.split("\n")) {
    if (!line || line[0] === "#") continue;
    let i = 0;
    while (i < line.length && line[i] !== "{" && line[i] !== " ") i++;
    const name = line.slice(0, i);
    const labels = {};
    if (line[i] === "{") {
      i++;
      while (i < line.length && line[i] !== "}") {
        const eq = line.indexOf("=", i);
        const key = line.slice(i, eq).trim();
        i = eq + 2;  // past ="
        let v = "";
        while (i < line.length && line[i] !== '"') {
          if (line[i] === "\\") {
            i++;
            v += line[i] === "n" ? "\n" : line[i];
          } else v += line[i];
          i++;
        }
        labels[key] = v;
        i++;  // past the closing quote
        if (line[i] === ",") i++;
      }
      i++;  // past }
    }
    const value = parseFloat(line.slice(i).trim().split(" ")[0]);
    if (!out.has(name)) out.set(name, []);
    out.get(name).push({ labels, value });
  }
  return out;
}

/// The sum of a family's samples whose labels match `match` (every key given, equal).
export function total(m, name, match = {}) {
  let s = 0;
  for (const x of m.get(name) || [])
    if (Object.entries(match).every(([k, v]) => x.labels[k] === v)) s += x.value;
  return s;
}

/// Bucket counts {le -> cumulative count} of a histogram family (label-less child).
export function buckets(m, name) {
  const b = new Map();
  for (const x of m.get(name + "_bucket") || []) b.set(x.labels.le, x.value);
  return b;
}

/// The q-quantile of the observations between two bucket snapshots (as Prometheus'
/// histogram_quantile: linear within the bucket); NaN when there were none.
export function quantile(q, now, before) {
  const les = [...now.keys()].sort((a, b) => parseFloat(a) - parseFloat(b));
  const counts = les.map((le) => (now.get(le) || 0) - ((before && before.get(le)) || 0));
  const n = counts[counts.length - 1];
  if (!(n > 0)) return NaN;
  const rank = q * n;
  let prevLe = 0, prevCount = 0;
  for (let i = 0; i < les.length; i++) {
    const le = parseFloat(les[i]);
    if (counts[i] >= rank) {
      if (!isFinite(le)) return prevLe;
      const inBucket = counts[i] - prevCount;
      return inBucket > 0 ? prevLe + (le - prevLe) * ((rank - prevCount) / inBucket) : le;
    }
    prevLe = le;
    prevCount = counts[i];
  }
  return prevLe;
}

export function fmt(x, digits = 1) {
  if (x === undefined || x === null || Number.isNaN(x)) return "–";
  if (Math.abs(x) >= 1000) return x.toFixed(0);
  return x.toFixed(digits);
}

export function fmtSeconds(s) {
  if (Number.isNaN(s)) return "–";
  return s < 1 ? `${(s * 1000).toFixed(1)} ms` : `${s.toFixed(2)} s`;
}

const COLORS = ["#1d4ed8", "#b45309", "#047857", "#9d174d", "#6d28d9"];

/// Draws series [{name, points: [[t, y], ...]}] as lines over the last `spanSeconds`.
export function drawChart(canvas, series, spanSeconds, unit = "") {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth, h = canvas.clientHeight;
  if (canvas.width !== w * dpr) canvas.width = w * dpr;
  if (canvas.height !== h * dpr) canvas.height = h * dpr;
  const g = canvas.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  const now = Date.now() / 1000;
  let max = 0;
  for (const s of series) for (const [, y] of s.points) if (isFinite(y)) max = Math.max(max, y);
  max = max > 0 ? max * 1.1 : 1;
  const left = 48, bottom = h - 18, top = 8, right = w - 6;
  g.strokeStyle = "#d4d4da";
  g.fillStyle = "#50505a";
  g.font = "11px system-ui, sans-serif";
  for (let i = 0; i <= 2; i++) {
    const y = bottom - ((bottom - top) * i) / 2;
    g.beginPath(); g.moveTo(left, y); g.lineTo(right, y); g.stroke();
    g.fillText(fmt((max * i) / 2, 2) + unit, 2, y + 4);
  }
  g.fillText(`-${spanSeconds}s`, left, h - 4);
  g.fillText("now", right - 22, h - 4);
  series.forEach((s, k) => {
    g.strokeStyle = COLORS[k % COLORS.length];
    g.lineWidth = 1.5;
    g.beginPath();
    let first = true;
    for (const [t, y] of s.points) {
      if (!isFinite(y)) continue;
      const x = right - ((now - t) / spanSeconds) * (right - left);
      const yy = bottom - (y / max) * (bottom - top);
      if (first) g.moveTo(x, yy); else g.lineTo(x, yy);
      first = false;
    }
    g.stroke();
    g.fillStyle = COLORS[k % COLORS.length];
    g.fillText(s.name, left + 4 + k * 90, top + 10);
  });
}
