// The reference for tokenizer.json: @lenml/tokenizers (a port of transformers.js's
// tokenizers: normalizer, pre-tokenizer, BPE, added tokens, as Hugging Face's
// `tokenizers` runs a tokenizer.json). The C++ test (tests/unit/tokenizer/
// hf_tokenizer_agreement_test.cpp) runs tokenhive on the same tokenizer.json files.
//
// argv[2]: a folder holding tokenizer.json and tokenizer_config.json.
// stdin: a JSON array of strings -> stdout: a JSON array, per string
// {ids: the ids without special tokens added, nfc: whether NFC leaves the string as it is}.
import { readFileSync } from "node:fs";
import { TokenizerLoader } from "@lenml/tokenizers";

const dir = process.argv[2];
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(readFileSync(`${dir}/tokenizer.json`, "utf8")),
  tokenizerConfig: JSON.parse(readFileSync(`${dir}/tokenizer_config.json`, "utf8")),
});
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const texts = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const out = texts.map((t) => ({
  ids: tokenizer.encode(t, { add_special_tokens: false }),
  nfc: t.normalize("NFC") === t,
}));
process.stdout.write(JSON.stringify(out));
