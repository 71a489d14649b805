// Independent GGUF parse for the cross-check in tests/gguf_test.cc: reads a
// local file with @huggingface/gguf (tests/npm, installed by scripts/setup.sh)
// and prints one JSON object shaped like `verity gguf-info --json`:
// version, alignment, data_start, metadata {key: {type, subType, value}},
// tensors [{name, shape, type, offset}].
// usage: node tests/conformance/gguf_check.mjs FILE.gguf
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "..", "npm", "package.json"));
let lib;
try {
  lib = require("@huggingface/gguf");
} catch (e) {
  console.error("gguf_check: @huggingface/gguf is not installed in tests/npm (run scripts/setup.sh): " + e.message);
  process.exit(2);
}

const file = process.argv[2];
if (!file) {
  console.error("usage: gguf_check.mjs FILE.gguf");
  process.exit(2);
}
const out = await lib.gguf(path.resolve(file), { allowLocalFile: true, typedMetadata: true });
// BigInt (u64/i64 values, shapes, offsets) as JSON numbers; our files keep them < 2^53.
const num = (v) => (typeof v === "bigint" ? Number(v) : v);
const deep = (v) => (Array.isArray(v) ? v.map(deep) : num(v));
const metadata = {};
for (const [key, e] of Object.entries(out.typedMetadata)) {
  if (key === "version" || key === "tensor_count" || key === "kv_count") continue;  // the header, not key/values
  const m = { type: e.type, value: deep(e.value) };
  if (e.subType !== undefined) m.subType = e.subType;
  metadata[key] = m;
}
const alignment = out.typedMetadata["general.alignment"] ? Number(out.typedMetadata["general.alignment"].value) : 32;
const result = {
  version: Number(out.typedMetadata.version.value),
  tensor_count: num(out.typedMetadata.tensor_count.value),
  kv_count: num(out.typedMetadata.kv_count.value),
  alignment,
  data_start: num(out.tensorDataOffset),
  metadata,
  tensors: out.tensorInfos.map((t) => ({ name: t.name, shape: t.shape.map(num), type: t.dtype, offset: num(t.offset) })),
};
process.stdout.write(JSON.stringify(result) + "\n");
