// The official `openai` npm client against a running `tokenhive serve`, used
// as any Node.js user would use it. Exits non-zero (with the failed assertion)
// when anything differs from what OpenAI's API documents.
//
//   node tests/oracle/openai_client.mjs BASE_URL MODEL REFERENCE_TEXT_FILE [API_KEY]
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import OpenAI from "openai";

const [baseURL, model, referenceFile, apiKey] = process.argv.slice(2);
const reference = readFileSync(referenceFile, "utf8").replace(/\n+$/, "");
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: apiKey ?? "unused", maxRetries: 0, timeout: 60_000 });

async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    console.log(`FAIL ${name}: ${e.stack ?? e}`);
    process.exitCode = 1;
  }
}

await check("models.list", async () => {
  const models = [];
  for await (const m of client.models.list()) models.push(m);
  assert.equal(models.length, 1);
  assert.equal(models[0].id, model);
  assert.equal(models[0].object, "model");
  const one = await client.models.retrieve(model);
  assert.equal(one.id, model);
});

await check("completions.create (greedy: the reference text)", async () => {
  const c = await client.completions.create({ model, prompt: "", max_tokens: 256, temperature: 0 });
  assert.equal(c.object, "text_completion");
  assert.equal(c.choices.length, 1);
  assert.equal(c.choices[0].text, reference);
  assert.equal(c.choices[0].finish_reason, "length");
  assert.equal(c.usage.prompt_tokens, 1);
  assert.equal(c.usage.completion_tokens, 256);
  assert.equal(c.usage.total_tokens, 257);
});

await check("completions.create stream with usage", async () => {
  const stream = await client.completions.create({
    model, prompt: "", max_tokens: 48, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  let text = "";
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const ch of chunk.choices) {
      text += ch.text;
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  assert.ok(reference.startsWith(text) && text.length > 100, text);
  assert.equal(finish, "length");
  assert.equal(usage?.completion_tokens, 48);
});

await check("chat.completions.create", async () => {
  const c = await client.chat.completions.create({
    model,
    messages: [{ role: "system", content: "You tell stories." }, { role: "user", content: "Once upon a time" }],
    max_tokens: 16,
    temperature: 0,
    seed: 3,
  });
  assert.equal(c.object, "chat.completion");
  assert.equal(c.choices[0].message.role, "assistant");
  assert.equal(typeof c.choices[0].message.content, "string");
  assert.ok(["stop", "length"].includes(c.choices[0].finish_reason));
  assert.ok(c.usage.prompt_tokens > 10);
});

await check("chat.completions.create stream (role first, then content, usage last)", async () => {
  const stream = await client.chat.completions.create({
    model, messages: [{ role: "user", content: "Hi" }], max_tokens: 12, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  assert.equal(chunks[0].object, "chat.completion.chunk");
  assert.equal(chunks[0].choices[0].delta.role, "assistant");
  const usage = chunks.at(-1).usage;
  assert.ok(usage && usage.completion_tokens >= 1 && usage.completion_tokens <= 12);
  const finish = chunks.flatMap((c) => c.choices).map((c) => c.finish_reason).filter(Boolean);
  assert.equal(finish.length, 1);
});

await check("chat.completions.stream helper", async () => {
  const runner = client.chat.completions.stream({
    model, messages: [{ role: "user", content: "Hi" }], max_tokens: 8, temperature: 0,
  });
  const final = await runner.finalChatCompletion();
  assert.equal(final.choices[0].message.role, "assistant");
});

async function expectError(status, type, param, fn) {
  try {
    await fn();
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIError, `not an APIError: ${e}`);
    assert.equal(e.status, status, e.message);
    if (type) assert.equal(e.type, type);
    if (param !== undefined) assert.equal(e.param, param);
    assert.ok(typeof e.error?.message === "string" && e.error.message.length > 0);
    return e;
  }
  assert.fail(`expected an HTTP ${status}`);
}

await check("errors: 400 with param", async () => {
  const e = await expectError(400, "invalid_request_error", "max_tokens", () =>
    client.completions.create({ model, prompt: "x", max_tokens: -1 }));
  assert.ok(e instanceof OpenAI.BadRequestError);
  await expectError(400, "invalid_request_error", "temperature", () =>
    client.chat.completions.create({ model, messages: [{ role: "user", content: "x" }], temperature: 7 }));
  await expectError(400, "invalid_request_error", "compute_type", () =>
    client.completions.create({ model, prompt: "x", compute_type: "fp16" }));
});

await check("errors: 404 unknown model", async () => {
  const e = await expectError(404, undefined, "model", () => client.completions.create({ model: "gpt-4o", prompt: "x" }));
  assert.ok(e instanceof OpenAI.NotFoundError);
  assert.equal(e.code, "model_not_found");
});

if (apiKey) {
  await check("errors: 401 without a valid key", async () => {
    const bad = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: "sk-wrong-wrong-wrong", maxRetries: 0 });
    const e = await expectError(401, undefined, undefined, () => bad.completions.create({ model, prompt: "x" }));
    assert.ok(e instanceof OpenAI.AuthenticationError);
  });
}
