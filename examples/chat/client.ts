/**
 * Streams SmolLM2's answer to a question with the official `openai` npm client.
 *
 *     deno run -A examples/chat/client.ts [base_url] [question]
 *
 * @module
 */

import OpenAI from "openai";

/**
 * Asks a question and streams the answer.
 *
 * @param baseURL The server's OpenAI base URL, e.g. `http://127.0.0.1:8000/v1`.
 * @param question The question.
 * @param onText Called with each piece of the answer as it arrives.
 * @returns The whole answer.
 */
export async function ask(
  baseURL: string,
  question: string,
  onText: (text: string) => void = () => {},
): Promise<string> {
  const client = new OpenAI({ baseURL, apiKey: Deno.env.get("OPENAI_API_KEY") ?? "none" });
  const stream = await client.chat.completions.create({
    model: "SmolLM2",
    messages: [
      { role: "system", content: "You are a helpful assistant." },
      { role: "user", content: question },
    ],
    max_tokens: 64,
    stream: true,
  });
  let answer = "";
  for await (const chunk of stream) {
    const text = chunk.choices[0]?.delta.content ?? "";
    answer += text;
    onText(text);
  }
  return answer;
}

if (import.meta.main) {
  const encoder = new TextEncoder();
  await ask(
    Deno.args[0] ?? "http://127.0.0.1:8000/v1",
    Deno.args[1] ?? "What is the capital of France?",
    (text) => Deno.stdout.writeSync(encoder.encode(text)),
  );
  console.log();
}
