// Structured output checked by references independent of tokenhive: the official `openai`
// npm client sends response_format json_schema (and the other forms) to a running
// `tokenhive serve`, and every generation, at temperature 1 with many seeds, is parsed with
// JSON.parse and validated with ajv (a JSON-schema validator); GBNF grammars' outputs are
// checked by small parsers written here. Exits non-zero on any invalid output.
//
//   node tests/oracle/structured_output.mjs BASE_URL MODEL [GENERATIONS_PER_SCHEMA]
import assert from "node:assert/strict";
import Ajv from "ajv";
import OpenAI from "openai";

const [baseURL, model, perSchemaArg] = process.argv.slice(2);
const perSchema = Number(perSchemaArg ?? 64);
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120_000 });
const ajv = new Ajv({ strict: false, allErrors: true });

async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    console.log(`FAIL ${name}: ${e.stack ?? e}`);
    process.exitCode = 1;
  }
}

// Strings are bounded, so every output is too: with max_tokens above that bound, a run that
// stops anywhere but at the grammar's end is a failure.
const schemas = {
  person: {
    type: "object",
    properties: {
      name: { type: "string", minLength: 1, maxLength: 12 },
      age: { type: "integer" },
      email: { type: "string", pattern: "^[a-z]{1,8}@[a-z]{1,8}\\.(com|org)$" },
      tags: { type: "array", items: { enum: ["red", "green", "blue"] }, minItems: 1, maxItems: 3 },
    },
    required: ["name", "age", "email", "tags"],
    additionalProperties: false,
  },
  nested: {
    type: "object",
    properties: {
      id: { type: "integer" },
      ok: { type: "boolean" },
      score: { type: "number" },
      inner: {
        type: "object",
        properties: { kind: { const: "leaf" }, note: { type: ["string", "null"], maxLength: 8 } },
        required: ["kind", "note"],
        additionalProperties: false,
      },
    },
    required: ["id", "ok", "score", "inner"],
    additionalProperties: false,
  },
  shapes: {
    $defs: {
      circle: { type: "object", properties: { r: { type: "number" } }, required: ["r"], additionalProperties: false },
      square: { type: "object", properties: { side: { type: "integer" } }, required: ["side"], additionalProperties: false },
    },
    type: "array",
    items: { anyOf: [{ $ref: "#/$defs/circle" }, { $ref: "#/$defs/square" }] },
    maxItems: 4,
  },
  optional: {
    type: "object",
    properties: {
      a: { type: "string", maxLength: 4 },
      b: { enum: [1, 2, "three", null] },
      c: { type: "array", items: { type: "integer" }, maxItems: 2 },
    },
    additionalProperties: false,
  },
};

async function generations(body, count) {
  const texts = [];
  for (let seed = 0; texts.length < count; seed += 16) {
    const n = Math.min(16, count - texts.length);
    const c = await client.chat.completions.create({ model, n, seed, temperature: 1, max_tokens: 600, ...body });
    for (const ch of c.choices) {
      assert.equal(ch.finish_reason, "stop", `finish_reason ${ch.finish_reason}: ${ch.message.content}`);
      texts.push(ch.message.content);
    }
  }
  return texts;
}

const messages = [{ role: "user", content: "Tell me a story." }];
for (const [name, schema] of Object.entries(schemas)) {
  await check(`response_format json_schema '${name}': ${perSchema} generations valid under ajv`, async () => {
    const validate = ajv.compile(schema);
    const texts = await generations(
      { messages, response_format: { type: "json_schema", json_schema: { name, schema, strict: true } } }, perSchema);
    for (const t of texts) {
      const v = JSON.parse(t);
      assert.ok(validate(v), `${t}: ${ajv.errorsText(validate.errors)}`);
    }
  });
}

await check("response_format json_object: every generation that ends is a JSON object", async () => {
  // Any object may nest without end: only the outputs that ended are parsed, and some must.
  const c = await client.chat.completions.create({ model, messages, n: 16, seed: 5, temperature: 1, max_tokens: 300,
                                                   response_format: { type: "json_object" } });
  // stories260K writes stories into the strings and rarely closes the object within
  // max_tokens; those cut by length are checked for the start only.
  for (const ch of c.choices) assert.ok(ch.message.content.startsWith("{"), ch.message.content);
  for (const ch of c.choices.filter((x) => x.finish_reason === "stop")) {
    const v = JSON.parse(ch.message.content);
    assert.ok(typeof v === "object" && v !== null && !Array.isArray(v), ch.message.content);
  }
});

// GBNF grammars, each output checked by a parser written here.
function arithmetic(s) {  // expr := term (('+'|'-') term)*, term := factor (('*'|'/') factor)*, factor := digits | '(' expr ')'
  let i = 0;
  const factor = () => {
    if (s[i] === "(") {
      i++;
      expr();
      if (s[i++] !== ")") throw new Error(`')' expected at ${i - 1}`);
      return;
    }
    const m = /^[0-9]{1,3}/.exec(s.slice(i));
    if (!m) throw new Error(`number expected at ${i}`);
    i += m[0].length;
  };
  const term = () => { factor(); while (s[i] === "*" || s[i] === "/") { i++; factor(); } };
  const expr = () => { term(); while (s[i] === "+" || s[i] === "-") { i++; term(); } };
  expr();
  if (i !== s.length) throw new Error(`trailing text at ${i}`);
}

const grammars = {
  arithmetic: ['root ::= expr\nexpr ::= term (("+" | "-") term)*\nterm ::= factor (("*" | "/") factor)*\n' +
    'factor ::= [0-9]{1,3} | "(" expr ")"', arithmetic],
  list: ['root ::= ("- " [a-z]{1,10} ("," " "? [a-z]{1,10}){0,3} "\\n"){1,4}',
    (s) => assert.match(s, /^(- [a-z]{1,10}(, ?[a-z]{1,10}){0,3}\n){1,4}$/)],
  json: ['root ::= object\nobject ::= "{" (pair ("," pair){0,2})? "}"\npair ::= string ":" value\n' +
    'value ::= string | [0-9]{1,4} | "true" | "false" | "null" | "[" (value ("," value){0,2})? "]"\n' +
    'string ::= "\\"" [a-z ]{0,6} "\\""', (s) => assert.equal(typeof JSON.parse(s), "object")],
};
for (const [name, [grammar, verify]] of Object.entries(grammars)) {
  await check(`GBNF '${name}': every output accepted by an independent parser`, async () => {
    const c = await client.completions.create({ model, prompt: "Once", n: 16, seed: 3, temperature: 1, max_tokens: 400, grammar });
    for (const ch of c.choices) {
      // An arithmetic expression can nest without end: a length finish is allowed there only.
      if (ch.finish_reason === "length" && name === "arithmetic") continue;
      assert.equal(ch.finish_reason, "stop", ch.text);
      try { verify(ch.text); } catch (e) { throw new Error(`${JSON.stringify(ch.text)}: ${e.message}`); }
    }
  });
}

await check("guided_choice and guided_regex (vLLM)", async () => {
  const c = await client.completions.create({ model, prompt: "Once", n: 8, seed: 1, temperature: 1, guided_choice: ["yes", "no", "maybe"] });
  for (const ch of c.choices) assert.ok(["yes", "no", "maybe"].includes(ch.text), ch.text);
  const r = await client.completions.create({ model, prompt: "Once", n: 8, seed: 1, temperature: 1, max_tokens: 40, guided_regex: "[A-Z][a-z]{2,5}-\\d{2}" });
  for (const ch of r.choices) assert.match(ch.text, /^[A-Z][a-z]{2,5}-\d{2}$/);
});

await check("a bad schema is a 400 naming the field", async () => {
  await assert.rejects(
    client.chat.completions.create({ model, messages, response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "integer", minimum: 3 } } } }),
    (e) => e.status === 400 && e.param === "response_format.json_schema.schema" && /minimum/.test(e.message));
});
