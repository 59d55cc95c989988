// The playground: a chat over POST /v1/chat/completions with stream: true. The conversation
// and settings live in local storage, the API key in session storage only; Stop aborts the
// fetch, which closes the connection, and the server cancels the request on that close.
import { apiFetch, errorText, setApiKey } from "./common.js";

const $ = (id) => document.getElementById(id);
const CONV = "tokenhive.conversation";
const SETTINGS = "tokenhive.settings";
const NUMBER_FIELDS = ["temperature", "max_tokens", "top_p", "top_k", "min_p", "seed", "presence_penalty", "frequency_penalty"];
const INT_FIELDS = new Set(["max_tokens", "top_k", "seed"]);
const ALL_FIELDS = [...NUMBER_FIELDS, "priority", "compute_type", "system"];

let conversation = load(CONV, []);
let model = "";
let controller = null;

function load(key, fallback) {
  try {
    const v = JSON.parse(localStorage.getItem(key));
    return v === null ? fallback : v;
  } catch (_) {
    return fallback;
  }
}

function save() {
  localStorage.setItem(CONV, JSON.stringify(conversation));
  const s = {};
  for (const f of ALL_FIELDS) s[f] = $(f).value;
  s.ignore_eos = $("ignore_eos").checked;
  localStorage.setItem(SETTINGS, JSON.stringify(s));
}

function showError(text) {
  $("error").textContent = text;
  $("error").hidden = !text;
}

function statsText(s) {
  if (!s) return "";
  const parts = [];
  if (s.ttft !== undefined) parts.push(`TTFT ${(s.ttft * 1000).toFixed(0)} ms`);
  if (s.tps !== undefined) parts.push(`${s.tps.toFixed(1)} tokens/s`);
  if (s.tokens !== undefined) parts.push(`${s.tokens} tokens`);
  if (s.finish) parts.push(`finish: ${s.finish}`);
  return parts.join(" · ");
}

function addMessage(m) {
  const div = document.createElement("div");
  div.className = "msg " + m.role;
  const text = document.createElement("span");
  text.className = "text";
  text.textContent = m.content;
  div.append(text);
  if (m.role === "assistant") {
    const stats = document.createElement("span");
    stats.className = "stats";
    stats.textContent = statsText(m.stats);
    div.append(stats);
  }
  $("conversation").append(div);
  return div;
}

function render() {
  $("conversation").replaceChildren();
  for (const m of conversation) addMessage(m);
}

function requestBody() {
  const messages = [];
  if ($("system").value.trim()) messages.push({ role: "system", content: $("system").value });
  for (const m of conversation) messages.push({ role: m.role, content: m.content });
  const body = { model, messages, stream: true, stream_options: { include_usage: true } };
  for (const f of NUMBER_FIELDS) {
    const v = $(f).value.trim();
    if (v === "") continue;
    body[f] = INT_FIELDS.has(f) ? parseInt(v, 10) : parseFloat(v);
  }
  if ($("priority").value) body.priority = $("priority").value;
  if ($("compute_type").value) body.compute_type = $("compute_type").value;
  if ($("ignore_eos").checked) body.ignore_eos = true;
  return body;
}

// Reads an SSE body: calls onData(json) per "data:" event until [DONE].
async function readEvents(resp, onData) {
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buf.search(/\r?\n\r?\n/)) >= 0) {
      const event = buf.slice(0, cut);
      buf = buf.slice(cut).replace(/^\r?\n\r?\n/, "");
      const data = event.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
      if (!data) continue;
      if (data === "[DONE]") return;
      onData(JSON.parse(data));
    }
  }
}

async function send(text) {
  showError("");
  conversation.push({ role: "user", content: text });
  addMessage(conversation[conversation.length - 1]);
  const answer = { role: "assistant", content: "", stats: {} };
  const div = addMessage(answer);
  const textEl = div.querySelector(".text"), statsEl = div.querySelector(".stats");
  controller = new AbortController();
  $("send").disabled = true;
  $("stop").disabled = false;
  const t0 = performance.now();
  let tFirst = 0, tLast = 0, chunks = 0;
  const update = () => {
    const s = answer.stats;
    if (tFirst) s.ttft = (tFirst - t0) / 1000;
    if (s.tokens === undefined || s.fromChunks) { s.tokens = chunks; s.fromChunks = true; }
    if (tLast > tFirst && s.tokens > 1) s.tps = (s.tokens - 1) / ((tLast - tFirst) / 1000);
    statsEl.textContent = statsText(s);
  };
  try {
    const resp = await apiFetch("/v1/chat/completions", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(requestBody()),
      signal: controller.signal,
    });
    if (!resp.ok) {
      if (resp.status === 401) $("key-section").hidden = false;
      throw new Error(await errorText(resp));
    }
    await readEvents(resp, (j) => {
      if (j.error) throw new Error(j.error.message || JSON.stringify(j.error));
      const c = j.choices && j.choices[0];
      if (c && c.delta && typeof c.delta.content === "string" && c.delta.content) {
        const now = performance.now();
        if (!tFirst) tFirst = now;
        tLast = now;
        chunks++;
        answer.content += c.delta.content;
        textEl.textContent = answer.content;
        $("conversation").scrollTop = $("conversation").scrollHeight;
      }
      if (c && c.finish_reason) answer.stats.finish = c.finish_reason;
      if (j.usage && j.usage.completion_tokens !== undefined) {
        answer.stats.tokens = j.usage.completion_tokens;
        answer.stats.fromChunks = false;
      }
      update();
    });
  } catch (e) {
    if (e.name === "AbortError") answer.stats.finish = "stopped";
    else showError(e.message || String(e));
  } finally {
    update();
    delete answer.stats.fromChunks;
    div.dataset.done = "true";
    conversation.push(answer);
    controller = null;
    $("send").disabled = false;
    $("stop").disabled = true;
    save();
  }
}

async function loadModel() {
  const resp = await apiFetch("/v1/models");
  if (resp.status === 401) {
    $("key-section").hidden = false;
    $("key-reason").textContent = await errorText(resp);
    return;
  }
  if (!resp.ok) {
    showError(await errorText(resp));
    return;
  }
  $("key-section").hidden = true;
  const j = await resp.json();
  model = (j.data && j.data[0] && j.data[0].id) || "";
  $("model-name").textContent = model ? "model: " + model : "";
}

function init() {
  const s = load(SETTINGS, {});
  for (const f of ALL_FIELDS) if (s[f] !== undefined) $(f).value = s[f];
  $("ignore_eos").checked = !!s.ignore_eos;
  render();
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("prompt").value;
    if (!text.trim() || controller) return;
    $("prompt").value = "";
    send(text);
  });
  $("prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("stop").addEventListener("click", () => controller && controller.abort());
  $("clear").addEventListener("click", () => {
    conversation = [];
    save();
    render();
    showError("");
  });
  $("key-form").addEventListener("submit", (e) => {
    e.preventDefault();
    setApiKey($("api-key").value.trim());
    $("api-key").value = "";
    loadModel();
  });
  for (const f of [...ALL_FIELDS, "ignore_eos"]) $(f).addEventListener("change", save);
  loadModel().catch((e) => showError(e.message));
}

init();
