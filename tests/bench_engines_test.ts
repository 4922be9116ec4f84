/**
 * `deno task bench:engines` still works, with the load spread over several client processes: a
 * short run of 2 rounds against the echo ceiling and each engine installed, with add_sub's queue
 * delay at 50 µs, written where `--out` says.
 * Nothing here depends on speed: each level only has to be measured, without errors.
 */

import assert from "node:assert/strict";
import { ENGINES } from "./_helpers.ts";

const NAMES = { echo: "Deno.serve echo (ceiling)", builtin: "built-in", triton: "Triton core" };

const servers = ["echo", ...ENGINES] as const;

/**
 * Runs `bench:engines` with `args`, its report written into a temporary directory, under a
 * watchdog (a client process that never ends fails the test instead of hanging CI).
 */
async function runBench(args: readonly string[]): Promise<{ output: string; report: string }> {
  const dir = await Deno.makeTempDir({ prefix: "denotriton_bench_engines_" });
  const out = `${dir}/engines.md`;
  try {
    const result = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        new URL("../bench/engines_http.ts", import.meta.url).pathname,
        ...args,
        "--out",
        out,
      ],
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(120_000),
    }).output();
    const decoder = new TextDecoder();
    const output = decoder.decode(result.stdout) + decoder.decode(result.stderr);
    assert.equal(result.code, 0, `bench:engines failed:\n${output}`);
    return { output, report: await Deno.readTextFile(out) };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** The cells of the report's measurement rows. */
function rowsOf(report: string): string[][] {
  return report.split("\n")
    .filter((line) => /^\| (Deno\.serve echo|built-in|Triton core) /.test(line))
    .map((line) => line.split("|").slice(1, -1).map((cell) => cell.trim()));
}

Deno.test(`bench:engines with 1 and 2 client processes on ${servers.join(", ")}`, async () => {
  const { output, report } = await runBench([
    ...["--servers", servers.join(","), "--clients", "identity", "--concurrency", "2"],
    ...["--client-processes", "1,2", "--duration", "0.5", "--warmup", "0.2", "--settle", "0.2"],
    ...["--rounds", "2", "--queue-delay-us", "50"],
  ]);
  const rows = rowsOf(report);
  // server, client, client processes, concurrency, requests, errors, compressed, …
  assert.deepEqual(
    rows.map((cells) => cells.slice(0, 4)),
    servers.flatMap((server) =>
      ["1", "2"].map((processes) => [NAMES[server], "identity", processes, "2"])
    ),
  );
  for (const cells of rows) {
    assert.ok(Number(cells[4]) > 0, `No request answered: ${cells.join(" | ")}`);
    // The row is one of its 2 rounds: its req/s lies within their range.
    const [low, high] = cells[8]!.split("–").map(Number) as [number, number];
    assert.ok(low <= Number(cells[7]) && Number(cells[7]) <= high, cells.join(" | "));
    assert.ok(low > 0, cells.join(" | "));
    assert.equal(cells[5], "0", `Errors: ${cells.join(" | ")}`);
    assert.equal(cells[6], "0", `Compressed for an identity client: ${cells.join(" | ")}`);
    // V8's helper threads were found and measured (Linux /proc: CI's host).
    assert.match(cells[13]!, /^\d+$/, `V8 helpers: ${cells.join(" | ")}`);
  }
  // Two client processes each answered some of the load.
  assert.match(output, /2×c=2: .*; by client process [1-9]\d* \+ [1-9]\d*\n/);
  // Both engines batched add_sub with the delay asked for (the bench checks each server's
  // config before it measures), and the report says so.
  assert.match(report, /dynamic batching up to 128, 50\s+µs queue delay/);
  // The ratio table has one row per level.
  assert.match(output, /\| identity \| 2 \| 2 \|/);
});

Deno.test("bench:engines with 2 HTTP threads serves the echo on 2 Workers too", async () => {
  const { report } = await runBench([
    ...["--servers", "echo,builtin", "--clients", "identity", "--concurrency", "4"],
    ...["--duration", "0.5", "--warmup", "0.2", "--settle", "0.2", "--rounds", "1"],
    ...["--http-threads", "2"],
  ]);
  assert.match(report, /httpThreadCount 2/);
  assert.match(report, /The echo runs on 2 Workers sharing the port/);
  const rows = rowsOf(report);
  assert.deepEqual(rows.map((cells) => cells[0]), [NAMES.echo, NAMES.builtin]);
  for (const cells of rows) {
    assert.ok(Number(cells[4]) > 0, `No request answered: ${cells.join(" | ")}`);
    assert.equal(cells[5], "0", `Errors: ${cells.join(" | ")}`);
  }
});
