/**
 * The measuring tools of issue 38 still work: `bench/process.ts` groups a process's threads by
 * name, `bench/isolate_round_trip.ts` measures its three kinds of crossing,
 * `bench/http_handler.ts` the HTTP handler in process against the echo, and
 * `bench/profile_engines.ts --by-thread` prints a server's CPU and context switches per request by
 * thread, and `--heap 1` the bytes a request allocates. Nothing here depends on speed: the figures
 * only have to be there.
 */

import assert from "node:assert/strict";
import { threadsByName, threadsCpuSeconds } from "../bench/process.ts";

const BENCH = new URL("../bench/", import.meta.url);

async function run(args: readonly string[]): Promise<string> {
  const result = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", ...args],
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
    // A watchdog: a tool that never ends fails the test instead of hanging CI.
    signal: AbortSignal.timeout(120_000),
  }).output();
  const decoder = new TextDecoder();
  const output = decoder.decode(result.stdout) + decoder.decode(result.stderr);
  assert.equal(result.code, 0, output);
  return output;
}

Deno.test("threadsByName finds a busy Worker's thread and counts its CPU", async () => {
  const source = "let x = 0; const end = Date.now() + 300; while (Date.now() < end) x++; " +
    "postMessage(x);";
  const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
  const worker = new Worker(url, { type: "module" });
  try {
    await new Promise((resolve) => worker.onmessage = resolve);
    const groups = threadsByName(Deno.pid);
    const workers = [...groups].filter(([name]) => name.startsWith("worker-"));
    assert.ok(workers.length > 0, `No Worker thread among ${[...groups.keys()].join(", ")}`);
    assert.ok(workers.some(([, group]) => group.seconds > 0 && group.switches >= 0));
    assert.ok(groups.get("deno")!.threads >= 1);
    assert.ok(threadsCpuSeconds(Deno.pid, "worker-") > 0);
    assert.ok(Number.isNaN(threadsCpuSeconds(2 ** 30, "deno")));
  } finally {
    worker.terminate();
    URL.revokeObjectURL(url);
  }
});

Deno.test("http_handler measures the handler in process against the echo", async () => {
  const output = await run([
    new URL("http_handler.ts", BENCH).pathname,
    ...["--rounds", "1", "--duration", "0.2", "--warmup", "0.2"],
  ]);
  assert.match(
    output,
    /CPU µs per request: echo \d+\.\d\d, handler \d+\.\d\d \(\d+\.\d\d×\)/,
  );
});

Deno.test("isolate_round_trip measures its four crossings", async () => {
  const output = await run([
    new URL("isolate_round_trip.ts", BENCH).pathname,
    ...["--round-trips", "200", "--rounds", "1"],
  ]);
  for (const mode of ["post small", "post infer", "atomics", "ring infer"]) {
    assert.match(
      output,
      new RegExp(`${mode} +\\d+\\.\\d µs CPU, \\d+\\.\\d µs wall per round trip`),
    );
  }
});

Deno.test("profile_engines --by-thread prints the built-in server's threads, loaded by two client processes", async () => {
  const output = await run([
    new URL("profile_engines.ts", BENCH).pathname,
    ...["--server", "builtin", "--by-thread", "1", "--warmup", "0.3", "--duration", "0.5"],
    ...["--client-processes", "2"],
  ]);
  assert.match(output, /^builtin 2×c=8 threads=1: [1-9]\d* requests; by thread name/m);
  assert.match(output, /^ +\d+\.\d µs +\d+\.\d\d switches +deno \(\d+ threads?\)$/m);
  assert.match(output, /^ +\d+\.\d µs +all threads$/m);
});

Deno.test("profile_engines --heap 1 prints the bytes a request allocates, by frame", async () => {
  // Longer than one segment of the heap profile (allocationsWhile), so several are summed.
  const output = await run([
    new URL("profile_engines.ts", BENCH).pathname,
    ...["--server", "builtin", "--heap", "1", "--warmup", "0.3", "--duration", "1.2", "--top", "5"],
  ]);
  assert.match(
    output,
    /^builtin 1×c=8: [1-9]\d* requests, [1-9]\d* bytes allocated per request \(sampled, the main isolate\)$/m,
  );
  assert.match(output, /^ +[1-9]\d* B\/req {2}\S.* \(\w+\.ts:\d+\)$/m);
});
