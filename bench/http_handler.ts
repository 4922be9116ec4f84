/**
 * The HTTP front end and the built-in engine in process, without sockets (issue 38): the KServe
 * handler (`createHttpHandler`) answers add_sub inference requests (JSON, two FP32 [1, 8] inputs,
 * `accept-encoding: identity`) one at a time, each a new `Request`, and the process's CPU per
 * request is printed; beside it, the same loop with what the `bench:engines` echo does with its
 * request (parse the JSON, answer it as JSON). The difference is what the front end and the
 * engine add to a request, with less noise than `bench:engines` over loopback: no client process,
 * no kernel, no HTTP parsing, and the rounds alternate. Building each `Request` is in both.
 *
 *     deno run -A bench/http_handler.ts [--rounds 5] [--duration 2] [--warmup 2]
 *
 * @module
 */

import { BuiltinEngine } from "../src/engine/builtin/engine.ts";
import { createHttpHandler } from "../src/frontend/http/server.ts";
import { addSubDefinition } from "./add_sub_definition.ts";
import { flag } from "./args.ts";
import { median } from "./perf.ts";
import { cpuSeconds } from "./process.ts";

const ROUNDS = Number(flag("rounds", "5"));
const SECONDS = Number(flag("duration", "2"));
const WARMUP = Number(flag("warmup", "2"));
const ELEMENTS = 8;
const BODY = JSON.stringify({
  inputs: ["a", "b"].map((name) => ({
    name,
    datatype: "FP32",
    shape: [1, ELEMENTS],
    data: Array.from({ length: ELEMENTS }, (_, i) => i + 1),
  })),
});

const engine = new BuiltinEngine({});
await engine.start();
await engine.loadModel(addSubDefinition(0));
const handler = createHttpHandler(engine, {});

function request(): Request {
  return new Request("http://127.0.0.1:8000/v2/models/AddSub/infer", {
    method: "POST",
    body: BODY,
    headers: {
      "content-type": "application/json",
      "content-length": String(BODY.length),
      "accept-encoding": "identity",
    },
  });
}

const loops = {
  echo: async (): Promise<void> => {
    const reply = new Response(JSON.stringify(await request().json()), {
      headers: { "content-type": "application/json" },
    });
    await reply.text();
  },
  handler: async (): Promise<void> => {
    const reply = await handler(request());
    if (reply.status !== 200) throw new Error(`HTTP ${reply.status}: ${await reply.text()}`);
    await reply.text();
  },
};

/** CPU µs of this process per call of `loop` over `seconds`. */
async function measure(loop: () => Promise<void>, seconds: number): Promise<number> {
  const cpu = cpuSeconds("/proc/self/stat");
  const end = performance.now() + seconds * 1000;
  let calls = 0;
  while (performance.now() < end) {
    await loop();
    calls++;
  }
  return (cpuSeconds("/proc/self/stat") - cpu) * 1e6 / calls;
}

try {
  for (const loop of Object.values(loops)) await measure(loop, WARMUP);
  const results: Record<keyof typeof loops, number[]> = { echo: [], handler: [] };
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, loop] of Object.entries(loops)) {
      results[name as keyof typeof loops].push(await measure(loop, SECONDS));
    }
  }
  const echo = median(results.echo);
  const front = median(results.handler);
  console.log(
    `HTTP handler in process, add_sub, built-in engine, queue delay 0 (Deno ${Deno.version.deno}, ` +
      `median of ${ROUNDS} rounds of ${SECONDS} s): CPU µs per request: echo ${echo.toFixed(2)}, ` +
      `handler ${front.toFixed(2)} (${(front / echo).toFixed(2)}×)`,
  );
} finally {
  await engine.stop();
}
