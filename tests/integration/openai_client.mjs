// Talks to a running `matricxon serve` with the official `openai` npm package:
// non-streaming and streaming chat must both work and agree (greedy).
// Usage: node openai_client.mjs <base_url> <model>
import OpenAI from "openai";

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "unused" });

function check(cond, what) {
  if (!cond) {
    console.error("FAIL: " + what);
    process.exit(1);
  }
  console.log("ok: " + what);
}

const messages = [
  { role: "system", content: "You are terse." },
  { role: "user", content: "Say something." },
];

const plain = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0 });
check(plain.object === "chat.completion", "non-streaming object is chat.completion");
check(typeof plain.choices[0].message.content === "string", "non-streaming content is a string");
check(["stop", "length"].includes(plain.choices[0].finish_reason), "finish_reason is stop or length");
check(plain.usage.prompt_tokens > 0, "usage.prompt_tokens > 0");
check(plain.usage.prompt_tokens_details.cached_tokens === 0, "usage.prompt_tokens_details.cached_tokens = 0");

const stream = await client.chat.completions.create({
  model, messages, max_tokens: 12, temperature: 0, stream: true,
  stream_options: { include_usage: true },
});
let text = "";
let finish = null;
let usage = null;
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage;
  for (const c of chunk.choices) {
    if (c.delta?.content) text += c.delta.content;
    if (c.finish_reason) finish = c.finish_reason;
  }
}
check(text === plain.choices[0].message.content, "streamed text equals the non-streaming text");
check(finish === plain.choices[0].finish_reason, "streamed finish_reason matches");
check(usage && usage.completion_tokens === plain.usage.completion_tokens, "streamed usage matches");

const models = await client.models.list();
check(models.data.some((m) => m.id === model), "models.list contains the model");

try {
  await client.chat.completions.create({ model: "no-such-model", messages, max_tokens: 2 });
  check(false, "unknown model raises");
} catch (e) {
  check(e.status === 404, "unknown model is a 404 APIError");
}
console.log("all openai client checks passed");
