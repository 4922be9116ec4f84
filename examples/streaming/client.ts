/**
 * Streams words from the Generator as they are generated, over HTTP (Server-Sent Events) or
 * gRPC (`ModelStreamInfer`), whichever the URL names.
 *
 *     deno run -A examples/streaming/client.ts [url] [prompt]
 *
 * @module
 */

import { ModelClient } from "../../src/client/mod.ts";
import { asDType, ndarray } from "../../mod.ts";

const decoder = new TextDecoder();

/**
 * Generates up to 6 words after a prompt, calling `onToken` for each as it arrives.
 *
 * @param url Server URL (`http://...` or `grpc://...`).
 * @param prompt The prompt.
 * @param onToken Called with each word as it arrives.
 * @returns Every word, in order.
 */
export async function runClient(
  url: string,
  prompt = "once",
  onToken: (token: string) => void = () => {},
): Promise<string[]> {
  await using client = new ModelClient(url, "Generator", { initTimeoutS: 30 });
  const tokens: string[] = [];
  const stream = client.inferStream({ prompt: ndarray([prompt], [1]) }, {
    parameters: { max_tokens: 6 },
  });
  for await (const { token } of stream) {
    const word = decoder.decode(asDType(token, "bytes").data[0]);
    tokens.push(word);
    onToken(word);
  }
  return tokens;
}

if (import.meta.main) {
  const prompt = Deno.args[1] ?? "once";
  await Deno.stdout.write(new TextEncoder().encode(prompt));
  await runClient(Deno.args[0] ?? "http://127.0.0.1:8000", prompt, (token) => {
    Deno.stdout.writeSync(new TextEncoder().encode(` ${token}`));
  });
  console.log();
}
