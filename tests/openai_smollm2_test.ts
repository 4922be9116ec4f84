/**
 * A real model behind the OpenAI API, on every engine: SmolLM2-135M-Instruct (llama.cpp through
 * node-llama-cpp, in a Worker instance, `examples/chat/`) streams real answers to the official
 * npm and Python `openai` clients, and embeds texts. One server per engine, with short answers
 * (8 tokens) and small contexts, so the file stays short. Needs `deno task setup:smollm2`: in CI
 * a missing model fails, elsewhere it skips.
 *
 * @module
 */

import assert from "node:assert/strict";
import OpenAI from "openai";
import { ENGINES, PEERS_REQUIRED, startServer, watchdog } from "./_helpers.ts";
import { sseData } from "../src/protocol/generate.ts";
import { bindSmollm2, CHAT_MODEL, EMBEDDING_MODEL } from "../examples/chat/model.ts";
import { smollm2Path } from "../examples/chat/smollm2.ts";

const installed = await Deno.stat(smollm2Path()).then(() => true, () => false);
if (!installed && PEERS_REQUIRED) {
  throw new Error(`SmolLM2 is not set up (${smollm2Path()}): run deno task setup:smollm2`);
}
const python = Deno.env.get("DENOTRITON_OPENAI_PYTHON") ?? ".cache/venv-openai/bin/python";
const hasPython = await Deno.stat(python).then(() => true, () => false);

for (const engine of ENGINES) {
  Deno.test({
    name: `SmolLM2 behind the OpenAI API (${engine}, a Worker instance)`,
    ignore: !installed,
    fn: async (t) => {
      await using triton = await startServer({ engine });
      await watchdog(
        bindSmollm2(triton, { instances: 1, threads: 2, contextSize: 512 }),
        "SmolLM2 to load",
        180_000,
      );
      const base = `${triton.urls.http}/v1`;
      const client = new OpenAI({ baseURL: base, apiKey: "unused", maxRetries: 0 });

      await t.step("npm openai: a streamed chat answer", async () => {
        const stream = await client.chat.completions.create({
          model: CHAT_MODEL,
          messages: [
            { role: "system", content: "You are a helpful assistant." },
            { role: "user", content: "What is the capital of France?" },
          ],
          max_tokens: 8,
          temperature: 0,
          stream: true,
          stream_options: { include_usage: true },
        });
        let content = "";
        let usage: OpenAI.CompletionUsage | undefined;
        const finishes: string[] = [];
        await watchdog(
          (async () => {
            for await (const chunk of stream) {
              content += chunk.choices[0]?.delta.content ?? "";
              if (chunk.choices[0]?.finish_reason) finishes.push(chunk.choices[0].finish_reason);
              if (chunk.usage) usage = chunk.usage;
            }
          })(),
          "the streamed answer",
        );
        assert.match(content, /Paris/);
        assert.equal(finishes.length, 1);
        assert.ok(
          usage !== undefined && usage.completion_tokens >= 1 && usage.completion_tokens <= 8,
        );
        // The model's own template around two messages: well over 10 tokens.
        assert.ok(usage.prompt_tokens > 10, `prompt_tokens ${usage.prompt_tokens}`);
        assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
      });

      await t.step("the raw stream ends with [DONE]", async () => {
        const response = await fetch(`${base}/chat/completions`, {
          method: "POST",
          body: JSON.stringify({
            model: CHAT_MODEL,
            messages: [{ role: "user", content: "Say hello" }],
            max_tokens: 4,
            stream: true,
          }),
        });
        const events = await watchdog(Array.fromAsync(sseData(response.body!)), "the raw stream");
        assert.equal(events.at(-1), "[DONE]");
        const chunks = events.slice(0, -1).map((data) => JSON.parse(data));
        assert.ok(chunks.every((chunk) => chunk.object === "chat.completion.chunk"));
        assert.equal(chunks.at(-1).choices[0].finish_reason, "length");
        const text = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? "").join("");
        assert.ok(text.trim().length > 0);
      });

      await t.step("npm openai: completions and embeddings", async () => {
        const completion = await client.completions.create({
          model: CHAT_MODEL,
          prompt: "The capital of France is",
          max_tokens: 4,
          temperature: 0,
        });
        assert.ok(completion.choices[0]!.text.trim().length > 0);
        assert.equal(completion.usage?.completion_tokens, 4);
        const embeddings = await client.embeddings.create({
          model: EMBEDDING_MODEL,
          input: ["The cat sleeps on the sofa", "A kitten naps on the couch", "Stock prices fell"],
        });
        const [cat, kitten, stocks] = embeddings.data.map((item) => item.embedding);
        assert.equal(cat!.length, 576);
        const cosine = (a: number[], b: number[]): number => {
          let dot = 0, na = 0, nb = 0;
          for (let i = 0; i < a.length; i++) {
            dot += a[i]! * b[i]!;
            na += a[i]! ** 2;
            nb += b[i]! ** 2;
          }
          return dot / Math.sqrt(na * nb);
        };
        // Mean-pooled states place the two sentences about a cat nearer each other than either
        // is to the one about stocks.
        assert.ok(cosine(cat!, kitten!) > cosine(cat!, stocks!));
        assert.ok(cosine(cat!, kitten!) > cosine(kitten!, stocks!));
      });

      await t.step(
        "Python openai: chat, stream, completions, embeddings, models, an error",
        async () => {
          if (!hasPython) {
            if (PEERS_REQUIRED) throw new Error(`Python with openai not found at ${python}`);
            console.warn(`skipped: no Python with openai at ${python}`);
            return;
          }
          const run = await watchdog(
            new Deno.Command(python, {
              args: [
                new URL("./interop/openai_client.py", import.meta.url).pathname,
                base,
                CHAT_MODEL,
                EMBEDDING_MODEL,
                "8",
              ],
              stdout: "piped",
              stderr: "piped",
            }).output(),
            "the Python client",
          );
          assert.ok(run.success, new TextDecoder().decode(run.stderr));
          const out = JSON.parse(new TextDecoder().decode(run.stdout));
          assert.deepEqual(out.models, [CHAT_MODEL, EMBEDDING_MODEL]);
          assert.match(out.chat.content, /Paris/);
          assert.equal(
            out.chat.usage.total_tokens,
            out.chat.usage.prompt_tokens + out.chat.usage.completion_tokens,
          );
          assert.ok(out.stream.content.length > 0);
          assert.deepEqual(out.stream.roles, ["assistant"]);
          assert.equal(out.stream.finish_reasons.length, 1);
          assert.equal(out.stream.usage.length, 1);
          assert.ok(out.completion.text.length > 0);
          assert.equal(out.embeddings.vectors.length, 2);
          assert.equal(out.embeddings.vectors[0].length, 576);
          assert.deepEqual(out.error, {
            status: 404,
            code: "model_not_found",
            type: "NotFoundError",
          });
        },
      );
    },
  });
}
