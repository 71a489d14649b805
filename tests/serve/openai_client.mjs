// The official `openai` npm client (tests/npm, pinned) against a real
// `verity serve` on 127.0.0.1: models, completions (with logprobs),
// streaming, chat (chatml, chosen by the operator for a model without a
// template), and the errors the client raises for 4xx answers. Prints one
// summary line; exits non-zero on the first failed check.
//   node openai_client.mjs BASE_URL API_KEY
import OpenAI from "openai";
import assert from "node:assert/strict";

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0 });
let checks = 0;
const check = async (name, fn) => {
  try {
    await fn();
    checks++;
  } catch (e) {
    console.error(`openai client: ${name}: ${e.stack || e}`);
    process.exit(1);
  }
};

await check("models.list", async () => {
  const models = await client.models.list();
  assert.equal(models.data.length, 1);
  assert.equal(models.data[0].id, "stories260K");
});

let greedy = "";
await check("completions.create", async () => {
  const r = await client.completions.create({ model: "stories260K", prompt: "Once upon a time", max_tokens: 24, temperature: 0, logprobs: 2 });
  greedy = r.choices[0].text;
  assert.ok(greedy.length > 0);
  assert.ok(["stop", "length"].includes(r.choices[0].finish_reason));
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, r.usage.completion_tokens);
  assert.equal(lp.tokens.join(""), greedy);
  for (const [i, v] of lp.token_logprobs.entries()) {
    assert.ok(v <= 0, `logprob ${v}`);
    const best = Math.max(...Object.values(lp.top_logprobs[i]));
    assert.ok(Math.abs(best - v) < 1e-5, "greedy picks the most likely token");
  }
});

await check("completions stream", async () => {
  const stream = await client.completions.create({ model: "stories260K", prompt: "Once upon a time", max_tokens: 24, temperature: 0, stream: true, stream_options: { include_usage: true } });
  let text = "", usage = null, finish = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(text, greedy, "streamed text equals the whole response");
  assert.ok(finish);
  assert.ok(usage && usage.completion_tokens > 0);
});

await check("chat.completions.create", async () => {
  const r = await client.chat.completions.create({ model: "stories260K", messages: [{ role: "user", content: "Tell me a story." }], max_tokens: 16, temperature: 0 });
  assert.equal(r.choices[0].message.role, "assistant");
  assert.equal(typeof r.choices[0].message.content, "string");
  assert.equal(r.object, "chat.completion");
});

await check("chat stream", async () => {
  const stream = await client.chat.completions.create({ model: "stories260K", messages: [{ role: "user", content: "Tell me a story." }], max_tokens: 16, temperature: 0, stream: true });
  let text = "", role = null;
  for await (const chunk of stream) {
    const d = chunk.choices[0]?.delta ?? {};
    if (d.role) role = d.role;
    text += d.content ?? "";
  }
  assert.equal(role, "assistant");
  const whole = await client.chat.completions.create({ model: "stories260K", messages: [{ role: "user", content: "Tell me a story." }], max_tokens: 16, temperature: 0 });
  assert.equal(text, whole.choices[0].message.content);
});

await check("seeded sampling repeats", async () => {
  const ask = () => client.completions.create({ model: "stories260K", prompt: "The cat", max_tokens: 20, temperature: 0.9, seed: 7 });
  const [a, b] = [await ask(), await ask()];
  assert.equal(a.choices[0].text, b.choices[0].text);
});

await check("errors", async () => {
  await assert.rejects(client.completions.create({ model: "stories260K", prompt: "a", temperature: "hot" }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && /temperature/.test(e.message));
  await assert.rejects(client.completions.create({ model: "nope", prompt: "a" }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
  const wrongKey = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: "wrong", maxRetries: 0 });
  await assert.rejects(wrongKey.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
});

console.log(`openai client: ${checks}/7 checks passed against ${baseURL}`);
