// Talks to a running `matricxon serve` with the official `openai` npm package:
// non-streaming and streaming chat must both work and agree (greedy); n
// choices; tools (a forced call, whole and through the SDK's stream helper,
// then the tool result in the history) and json_schema structured output on
// a model with Qwen 3's template.
// Usage: node openai_client.mjs <base_url> <model> <tools_model>
import OpenAI from "openai";

const [baseURL, model, toolsModel] = process.argv.slice(2);
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
const two = await client.chat.completions.create({ model, messages, max_tokens: 6, temperature: 0, n: 2 });
check(two.choices.length === 2 && two.choices[1].index === 1, "n: 2 gives two choices");
check(two.choices[0].message.content === two.choices[1].message.content, "greedy choices agree");

const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "The weather of a city",
      parameters: {
        type: "object",
        properties: {
          city: { type: "string", maxLength: 8 },
          unit: { type: "string", enum: ["celsius", "fahrenheit"] },
        },
        required: ["city", "unit"],
      },
    },
  },
];
const ask = [{ role: "user", content: "What is the weather in Oslo?" }];
const forced = {
  model: toolsModel, messages: ask, tools, max_tokens: 400, temperature: 0.8, seed: 5,
  tool_choice: { type: "function", function: { name: "get_weather" } }, parallel_tool_calls: false,
};
const called = await client.chat.completions.create(forced);
const call = called.choices[0].message.tool_calls?.[0];
check(called.choices[0].finish_reason === "tool_calls", "a forced call finishes with tool_calls");
check(call && call.type === "function" && call.function.name === "get_weather", "the call names get_weather");
const args = JSON.parse(call.function.arguments);
check(typeof args.city === "string" && ["celsius", "fahrenheit"].includes(args.unit), "its arguments follow the schema");

const runner = client.chat.completions.stream({ ...forced, stream: true });
const streamed = await runner.finalChatCompletion();
const scall = streamed.choices[0].message.tool_calls?.[0];
check(scall && scall.function.name === "get_weather", "the SDK's stream helper assembles the streamed call");
check(scall.function.arguments === call.function.arguments, "streamed arguments equal the whole reply's (same seed)");
check(streamed.choices[0].finish_reason === "tool_calls", "streamed finish_reason is tool_calls");

const answer = await client.chat.completions.create({
  model: toolsModel, tools, max_tokens: 4, temperature: 0,
  messages: [...ask, called.choices[0].message, { role: "tool", tool_call_id: call.id, content: '{"temp": 3}' }],
});
check(answer.choices[0].message.role === "assistant", "a tool result in the history is accepted");

const person = {
  type: "object",
  properties: { name: { type: "string", maxLength: 6 }, age: { type: "integer", minimum: 0, maximum: 120 } },
  required: ["name", "age"],
  additionalProperties: false,
};
const structured = await client.chat.completions.create({
  model: toolsModel, messages: ask, max_tokens: 200, temperature: 0.8, seed: 9,
  response_format: { type: "json_schema", json_schema: { name: "person", schema: person, strict: true } },
});
const value = JSON.parse(structured.choices[0].message.content);
check(typeof value.name === "string" && Number.isInteger(value.age) && value.age >= 0 && value.age <= 120,
  "json_schema output parses and follows the schema");

try {
  await client.chat.completions.create({ model, messages, max_tokens: 2, response_format: { type: "xml" } });
  check(false, "an unknown response_format raises");
} catch (e) {
  check(e.status === 400 && /response_format/.test(e.message), "an unknown response_format is a 400 naming it");
}
console.log("all openai client checks passed");
