// The reference renderer for chat templates: @huggingface/jinja, which
// renders as transformers' apply_chat_template does (trim_blocks and
// lstrip_blocks on). The C++ tests run this as a child process and compare
// byte for byte.
//
// stdin: one JSON case {template, messages, add_generation_prompt, bos_token,
// eos_token, extra?} -> stdout: the rendering (exit 0), or the error message
// on stderr (exit 1).
// stdin: a JSON array of cases -> stdout: a JSON array of {ok, output} or
// {ok: false, error}, one per case (one process for many renders).
import { Template } from "@huggingface/jinja";

function render(c) {
  const context = {
    messages: c.messages,
    add_generation_prompt: c.add_generation_prompt ?? false,
    bos_token: c.bos_token ?? "",
    eos_token: c.eos_token ?? "",
    ...(c.extra ?? {}),
  };
  return new Template(c.template).render(context);
}

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const input = JSON.parse(Buffer.concat(chunks).toString("utf8"));

if (Array.isArray(input)) {
  const results = input.map((c) => {
    try {
      return { ok: true, output: render(c) };
    } catch (e) {
      return { ok: false, error: String(e?.message ?? e) };
    }
  });
  process.stdout.write(JSON.stringify(results));
} else {
  try {
    process.stdout.write(render(input));
  } catch (e) {
    process.stderr.write(`render_chat_template: ${e?.message ?? e}\n`);
    process.exit(1);
  }
}
