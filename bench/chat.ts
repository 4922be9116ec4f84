/**
 * SmolLM2 behind DenoTriton's OpenAI API against a direct loop over the same runtime
 * (`examples/chat/runtime.ts`, llama.cpp through node-llama-cpp) in this process: tokens per
 * second and time to first token at 1, 4 and 8 concurrent streams, with 1 and 2 instances
 * (Workers on the server, runtimes in the loop; `--threads` llama.cpp threads per instance, 1 by
 * default: on a shared 2-core host llama.cpp's threads wait for each other by spinning, so two of
 * them per instance lose most of their time whenever anything else runs).
 * Every stream asks the same question with temperature 0 and `max_tokens`, so both sides
 * generate the same tokens.
 *
 * Run: `deno task bench:chat [--engine builtin|triton] [--tokens 32] [--rounds 2]
 * [--out bench/results/chat-<date>.md]` (after `deno task setup:smollm2`).
 *
 * @module
 */

import { Triton } from "../mod.ts";
import type { EngineKind } from "../src/engine/engine.ts";
import { sseData } from "../src/protocol/generate.ts";
import { bindSmollm2, CHAT_MODEL } from "../examples/chat/model.ts";
import { Smollm2Runtime } from "../examples/chat/runtime.ts";
import { findSmollm2 } from "../examples/chat/smollm2.ts";
import { flag, option } from "./args.ts";

const QUESTION = "Write a short story about a dragon who learns to bake bread.";
const TOKENS = Number(flag("tokens", "32"));
const ROUNDS = Number(flag("rounds", "2"));
const ENGINE = flag("engine", "builtin") as EngineKind;
const CONCURRENCY = [1, 4, 8];
const CORES = navigator.hardwareConcurrency;
const INSTANCES = [...new Set([1, Math.min(2, CORES)])];
const THREADS = Number(flag("threads", "1"));

/** One stream's measures. */
interface Stream {
  /** Milliseconds from the request to the first token's text. */
  ttft: number;
  /** Tokens generated. */
  tokens: number;
}

/** One cell: streams at a concurrency. */
interface Cell {
  tokensPerSecond: number;
  ttftMedian: number;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/** Runs `count` streams, `concurrency` at a time, and measures them. */
async function measure(
  concurrency: number,
  count: number,
  stream: () => Promise<Stream>,
): Promise<Cell> {
  const streams: Stream[] = [];
  let next = 0;
  const start = performance.now();
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < count) {
      next++;
      streams.push(await stream());
    }
  }));
  const seconds = (performance.now() - start) / 1000;
  return {
    tokensPerSecond: streams.reduce((sum, s) => sum + s.tokens, 0) / seconds,
    ttftMedian: median(streams.map((s) => s.ttft)),
  };
}

/** The direct loop: `instances` runtimes in this process, a stream takes a free one. */
async function direct(instances: number, modelPath: string): Promise<Map<number, Cell>> {
  const threads = THREADS;
  const runtimes = await Promise.all(
    Array.from(
      { length: instances },
      () => Smollm2Runtime.generator({ modelPath, contextSize: 512, threads }),
    ),
  );
  const free = [...runtimes];
  const waiting: ((runtime: Smollm2Runtime) => void)[] = [];
  const take = (): Promise<Smollm2Runtime> =>
    free.length > 0
      ? Promise.resolve(free.pop()!)
      : new Promise((resolve) => waiting.push(resolve));
  const give = (runtime: Smollm2Runtime): void => {
    const waiter = waiting.shift();
    if (waiter) waiter(runtime);
    else free.push(runtime);
  };
  const one = async (): Promise<Stream> => {
    const start = performance.now();
    const runtime = await take();
    try {
      let ttft = 0;
      let tokens = 0;
      for await (
        const step of runtime.generate({
          messages: [{ role: "user", content: QUESTION }],
          maxTokens: TOKENS,
          temperature: 0,
          stop: [],
          signal: new AbortController().signal,
        })
      ) {
        if (ttft === 0 && step.text !== "") ttft = performance.now() - start;
        tokens += step.tokens ?? 1;
      }
      return { ttft, tokens };
    } finally {
      give(runtime);
    }
  };
  const cells = new Map<number, Cell>();
  try {
    await one(); // warm-up
    for (const c of CONCURRENCY) cells.set(c, await measure(c, c * ROUNDS, one));
  } finally {
    for (const runtime of runtimes) await runtime.dispose();
  }
  return cells;
}

/** The server: `instances` Workers, streams over HTTP as Server-Sent Events. */
async function served(instances: number): Promise<Map<number, Cell>> {
  const threads = THREADS;
  await using triton = new Triton({
    engine: ENGINE,
    config: { httpPort: 0, allowGrpc: false, allowMetrics: false, logVerbose: 0 },
  });
  await bindSmollm2(triton, { instances, threads, contextSize: 512, embeddings: false });
  await triton.run();
  const url = `${triton.urls.http}/v1/chat/completions`;
  const body = JSON.stringify({
    model: CHAT_MODEL,
    messages: [{ role: "user", content: QUESTION }],
    max_tokens: TOKENS,
    temperature: 0,
    stream: true,
    stream_options: { include_usage: true },
  });
  const one = async (): Promise<Stream> => {
    const start = performance.now();
    const response = await fetch(url, { method: "POST", body });
    if (response.status !== 200) {
      throw new Error(`HTTP ${response.status}: ${await response.text()}`);
    }
    let ttft = 0;
    let tokens = 0;
    for await (const data of sseData(response.body!)) {
      if (data === "[DONE]") break;
      const chunk = JSON.parse(data);
      if (ttft === 0 && chunk.choices[0]?.delta?.content) ttft = performance.now() - start;
      if (chunk.usage) tokens = chunk.usage.completion_tokens;
    }
    return { ttft, tokens };
  };
  const cells = new Map<number, Cell>();
  await one(); // warm-up
  for (const c of CONCURRENCY) cells.set(c, await measure(c, c * ROUNDS, one));
  return cells;
}

const modelPath = await findSmollm2();
const rows: string[] = [];
const results = new Map<string, Map<number, Cell>>();
for (const instances of INSTANCES) {
  console.error(`direct loop, ${instances} runtime(s)`);
  results.set(`direct ${instances}`, await direct(instances, modelPath));
  console.error(`server (${ENGINE}), ${instances} Worker(s)`);
  results.set(`served ${instances}`, await served(instances));
}
for (const instances of INSTANCES) {
  const threads = THREADS;
  for (const c of CONCURRENCY) {
    const d = results.get(`direct ${instances}`)!.get(c)!;
    const s = results.get(`served ${instances}`)!.get(c)!;
    rows.push(
      `| ${instances} × ${threads} threads | ${c} | ${d.tokensPerSecond.toFixed(1)} | ${
        s.tokensPerSecond.toFixed(1)
      } | ${(s.tokensPerSecond / d.tokensPerSecond).toFixed(3)} | ${d.ttftMedian.toFixed(0)} | ${
        s.ttftMedian.toFixed(0)
      } |`,
    );
  }
}
const date = new Date().toISOString().slice(0, 10);
const report = [
  `# SmolLM2-135M-Instruct: DenoTriton's OpenAI API against a direct loop (${date})`,
  "",
  `\`deno task bench:chat --engine ${ENGINE} --tokens ${TOKENS} --rounds ${ROUNDS} --threads ${THREADS}\` on ${CORES} cores: ` +
  `each stream a chat answer of ${TOKENS} tokens (temperature 0), ${ROUNDS} × c streams per cell, ` +
  "context 512 tokens. Direct: the same runtime (`examples/chat/runtime.ts`) called in this process, " +
  "a stream taking a free runtime; served: Worker instances behind `/v1/chat/completions`, streamed " +
  "as Server-Sent Events to a client in the same process.",
  "",
  "| instances | streams | direct tok/s | served tok/s | served / direct | direct TTFT ms (median) | served TTFT ms (median) |",
  "| --- | --: | --: | --: | --: | --: | --: |",
  ...rows,
  "",
].join("\n");
console.log(report);
const out = option("out");
if (out !== undefined) await Deno.writeTextFile(out, report);
