// The official `openai` npm client (tests/npm, pinned) asking a served
// model for one chat completion, greedy, once whole and once streamed, with
// the messages in MESSAGES_JSON. Prints one JSON line: the usage the server
// reported, both texts and the finish reason; exits non-zero when the two
// answers disagree or the client raised.
//   node openai_chat.mjs BASE_URL MODEL MESSAGES_JSON MAX_TOKENS
import OpenAI from "openai";
import fs from "node:fs";

const [baseURL, model, messagesPath, maxTokens] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: "unused", maxRetries: 0 });
const messages = JSON.parse(fs.readFileSync(messagesPath, "utf8"));
const ask = { model, messages, max_tokens: Number(maxTokens), temperature: 0 };
try {
  const whole = await client.chat.completions.create(ask);
  const stream = await client.chat.completions.create({ ...ask, stream: true, stream_options: { include_usage: true } });
  let streamed = "", usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) streamed += c.delta.content ?? "";
  }
  const text = whole.choices[0].message.content;
  if (streamed !== text) throw new Error(`streamed ${JSON.stringify(streamed)} != whole ${JSON.stringify(text)}`);
  if (!usage || usage.prompt_tokens !== whole.usage.prompt_tokens)
    throw new Error(`streamed usage ${JSON.stringify(usage)} != whole ${JSON.stringify(whole.usage)}`);
  console.log(JSON.stringify({ prompt_tokens: whole.usage.prompt_tokens, completion_tokens: whole.usage.completion_tokens,
                               text, role: whole.choices[0].message.role, finish_reason: whole.choices[0].finish_reason }));
} catch (e) {
  console.error(`openai chat: ${e.stack || e}`);
  process.exit(1);
}
