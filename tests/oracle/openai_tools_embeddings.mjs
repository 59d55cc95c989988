// Tool calling and embeddings with the official `openai` npm client against a running
// `tokenhive serve` whose chat template is Hermes-style (Qwen 2.5's, `--chat-template`).
// The served model is tiny and never writes a tool call by itself, so the call's text is
// given to the server as already generated through the native `continuation` field (a
// stream resumed from generated token ids): from there on it is the server's real path,
// detokenizer -> tool-call parser -> OpenAI deltas -> the client's own stream assembler.
// Exits non-zero (printing FAIL lines) when anything differs from OpenAI's documented shapes.
//
//   node tests/oracle/openai_tools_embeddings.mjs BASE_URL MODEL
import assert from "node:assert/strict";
import Ajv from "ajv";
import OpenAI from "openai";

const [baseURL, model] = process.argv.slice(2);
const ajv = new Ajv({ strict: false, allErrors: true });
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: "unused", maxRetries: 0, timeout: 60_000 });

async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    console.log(`FAIL ${name}: ${e.stack ?? e}`);
    process.exitCode = 1;
  }
}

async function post(path, body) {
  const r = await fetch(`${baseURL}${path}`, { method: "POST", body: JSON.stringify(body) });
  return { status: r.status, json: await r.json() };
}

const tools = [{
  type: "function",
  function: {
    name: "get_weather", description: "Get the weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
}];
const question = [{ role: "user", content: "Weather in Oslo?" }];

await check("tools render into the prompt; tool_choice none renders none", async () => {
  const plain = await client.chat.completions.create({ model, messages: question, max_tokens: 4, temperature: 0 });
  const withTools = await client.chat.completions.create({ model, messages: question, tools, max_tokens: 4, temperature: 0 });
  const none = await client.chat.completions.create({
    model, messages: question, tools, tool_choice: "none", max_tokens: 4, temperature: 0,
  });
  assert.ok(withTools.usage.prompt_tokens > plain.usage.prompt_tokens + 50, JSON.stringify([plain.usage, withTools.usage]));
  assert.equal(none.usage.prompt_tokens, plain.usage.prompt_tokens);
  // The model wrote no call: plain content, no tool_calls.
  assert.equal(typeof withTools.choices[0].message.content, "string");
  assert.equal(withTools.choices[0].message.tool_calls, undefined);
  assert.equal(withTools.choices[0].finish_reason, "length");
});

let assistant = null;  // the streamed call, as the client assembled it
await check("a streamed tool call as OpenAI tool-call deltas", async () => {
  const prompt = await post("/tokenize", { messages: question, add_generation_prompt: true });
  assert.equal(prompt.status, 200);
  const callText = 'I will check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>';
  const ids = await post("/tokenize", { content: callText });
  assert.equal(ids.status, 200);
  // A continuation sends no role chunk (the first cell did), which the client's
  // ChatCompletionStream insists on: the deltas are assembled here as its accumulator does.
  const stream = await client.chat.completions.create({
    model, messages: question, tools, seed: 7, temperature: 0, max_tokens: 200, stream: true,
    stop: ["</tool_call>"], include_stop_str_in_output: true,
    continuation: { prompt_token_ids: prompt.json.tokens, token_ids: ids.json.tokens, text_bytes: 0 },
  });
  const deltas = [];
  const message = { role: "assistant", content: "", tool_calls: [] };
  let finish = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      if (c.finish_reason) finish = c.finish_reason;
      message.content += c.delta?.content ?? "";
      for (const d of c.delta?.tool_calls ?? []) {
        deltas.push(d);
        if (d.id) message.tool_calls[d.index] = { id: d.id, type: d.type, function: { name: d.function.name, arguments: "" } };
        message.tool_calls[d.index].function.arguments += d.function?.arguments ?? "";
      }
    }
  }
  const done = { choices: [{ finish_reason: finish, message }] };
  const choice = done.choices[0];
  assert.equal(choice.finish_reason, "tool_calls");
  // (SentencePiece's dummy prefix gives the text a leading space: the ids decode to " I will...")
  assert.equal(choice.message.content.trim(), "I will check.");
  assert.equal(choice.message.tool_calls.length, 1);
  const call = choice.message.tool_calls[0];
  assert.match(call.id, /^call_[A-Za-z0-9]{24}$/);
  assert.equal(call.type, "function");
  assert.equal(call.function.name, "get_weather");
  assert.deepEqual(JSON.parse(call.function.arguments), { city: "Oslo" });
  // OpenAI's delta shape: the first carries index, id, type and the name; then the arguments.
  assert.equal(deltas[0].index, 0);
  assert.equal(deltas[0].id, call.id);
  assert.equal(deltas[0].function.name, "get_weather");
  assert.equal(deltas[0].function.arguments, "");
  assert.equal(deltas[1].id, undefined);
  assert.equal(deltas.map((d) => d.function.arguments).join(""), call.function.arguments);
  assistant = choice.message;
});

await check("the tool's answer goes back: assistant tool_calls and a tool message render", async () => {
  assert.ok(assistant, "no call from the previous check");
  const messages = [...question, { role: "assistant", content: assistant.content, tool_calls: assistant.tool_calls },
                    { role: "tool", tool_call_id: assistant.tool_calls[0].id, content: '{"temp": 3}' }];
  const before = await client.chat.completions.create({ model, messages: question, tools, max_tokens: 2, temperature: 0 });
  const after = await client.chat.completions.create({ model, messages, tools, max_tokens: 8, temperature: 0 });
  assert.equal(after.object, "chat.completion");
  assert.ok(after.usage.prompt_tokens > before.usage.prompt_tokens + 20, JSON.stringify([before.usage, after.usage]));
  const streamed = await client.chat.completions.create({ model, messages, tools, max_tokens: 8, temperature: 0, stream: true });
  let text = "";
  for await (const chunk of streamed) for (const c of chunk.choices) text += c.delta?.content ?? "";
  assert.equal(text, after.choices[0].message.content);
});

// tool_choice "required" and a named function are enforced with the grammar engine: the
// tiny model, which never calls a tool by itself, calls one at every seed, and the arguments
// validate under ajv against the function's parameters. (Bounded parameters, one call: the
// grammar then ends the output within max_tokens.)
const alarmTools = [
  { type: "function", function: { name: "set_alarm", parameters: {
      type: "object", properties: { hour: { type: "integer" }, am: { type: "boolean" } },
      required: ["hour", "am"], additionalProperties: false } } },
  { type: "function", function: { name: "set_volume", parameters: {
      type: "object", properties: { level: { enum: ["low", "mid", "high"] } },
      required: ["level"], additionalProperties: false } } },
];
const validators = Object.fromEntries(alarmTools.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));
function expectCall(choice, names, what) {
  assert.equal(choice.finish_reason, "tool_calls", `${what}: ${JSON.stringify(choice)}`);
  assert.equal(choice.message.tool_calls.length, 1, what);
  const fn = choice.message.tool_calls[0].function;
  assert.ok(names.includes(fn.name), `${what}: ${fn.name}`);
  const v = validators[fn.name];
  assert.ok(v(JSON.parse(fn.arguments)), `${what}: ${fn.arguments}: ${ajv.errorsText(v.errors)}`);
  return fn.name;
}

await check("tool_choice named and required are enforced: every seed calls, arguments valid under ajv", async () => {
  const named = { type: "function", function: { name: "set_alarm" } };
  const seen = new Set();
  for (let seed = 1; seed <= 6; seed++) {
    const base = { model, messages: question, tools: alarmTools, seed, temperature: 1, max_tokens: 300, parallel_tool_calls: false };
    const a = await client.chat.completions.create({ ...base, tool_choice: named });
    expectCall(a.choices[0], ["set_alarm"], `named, seed ${seed}`);
    const b = await client.chat.completions.create({ ...base, tool_choice: "required" });
    seen.add(expectCall(b.choices[0], ["set_alarm", "set_volume"], `required, seed ${seed}`));
  }
  // Streamed: the client's own assembler gets the same call as the whole response.
  const base = { model, messages: question, tools: alarmTools, seed: 3, temperature: 1, max_tokens: 300, tool_choice: named };
  const whole = await client.chat.completions.create(base);
  const stream = client.chat.completions.stream(base);
  const streamed = await stream.finalChatCompletion();
  assert.deepEqual(streamed.choices[0].message.tool_calls.map((c) => c.function),
                   whole.choices[0].message.tool_calls.map((c) => c.function));
  await assert.rejects(
    client.chat.completions.create({ ...base, response_format: { type: "json_object" } }),
    (e) => e.status === 400 && e.param === "tool_choice");
  await assert.rejects(
    client.chat.completions.create({ ...base, tools: [{ type: "function", function: { name: "set_alarm",
      parameters: { type: "object", properties: { hour: { type: "integer", multipleOf: 2 } } } } }] }),
    (e) => e.status === 400 && e.param === "tools[0].function.parameters");
});

await check("bad tools are a 400 naming the field", async () => {
  await assert.rejects(
    client.chat.completions.create({ model, messages: question, tools, tool_choice: { type: "function", function: { name: "nope" } } }),
    (e) => e.status === 400 && e.param === "tool_choice.function.name");
  await assert.rejects(
    client.chat.completions.create({ model, messages: question, tools: [{ type: "function", function: { name: "a b" } }] }),
    (e) => e.status === 400 && e.param === "tools[0].function.name");
});

const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

await check("embeddings: the client's base64 (its default) equals floats; a batch equals each alone", async () => {
  const inputs = ["Once upon a time", "there was a little girl", "named Lily. She liked to play outside."];
  const batch = await client.embeddings.create({ model, input: inputs });  // the client asks for base64 and decodes it
  const floats = await client.embeddings.create({ model, input: inputs, encoding_format: "float" });
  assert.equal(batch.object, "list");
  assert.equal(batch.data.length, 3);
  assert.equal(batch.model, model);
  assert.ok(batch.usage.prompt_tokens > 10 && batch.usage.total_tokens === batch.usage.prompt_tokens);
  for (let i = 0; i < inputs.length; i++) {
    assert.equal(batch.data[i].object, "embedding");
    assert.equal(batch.data[i].index, i);
    assert.deepEqual(Array.from(batch.data[i].embedding), floats.data[i].embedding);
    assert.ok(Math.abs(norm(floats.data[i].embedding) - 1) < 1e-5);
    const alone = await client.embeddings.create({ model, input: inputs[i], encoding_format: "float" });
    const a = alone.data[0].embedding;
    assert.equal(a.length, floats.data[i].embedding.length);
    for (let j = 0; j < a.length; j++) assert.ok(Math.abs(a[j] - floats.data[i].embedding[j]) <= 1e-5, `${i}/${j}`);
  }
  const ids = await post("/tokenize", { prompt: inputs[0] });
  const byIds = await client.embeddings.create({ model, input: [ids.json.tokens], encoding_format: "float" });
  assert.deepEqual(byIds.data[0].embedding, floats.data[0].embedding);
});

await check("embeddings: bad input is a 400 naming the field", async () => {
  await assert.rejects(client.embeddings.create({ model, input: "x", dimensions: 5 }), (e) => e.status === 400 && e.param === "dimensions");
  await assert.rejects(client.embeddings.create({ model, input: ["x", ""] }), (e) => e.status === 400 && e.param === "input[1]");
  await assert.rejects(client.embeddings.create({ model, input: [[1, 999999]] }), (e) => e.status === 400 && e.param === "input");
});
