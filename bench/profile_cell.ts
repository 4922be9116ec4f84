/**
 * Profiles one DenoTriton benchmark cell: starts `bench/denotriton/server.ts` under
 * `--inspect`, drives it with perf_analyzer, and prints the frames with the most self time,
 * each with the call paths that lead to it (bottom-up), so a hot native frame such as
 * `writeBuffer` shows who calls it. The raw profile can be written for Chrome DevTools.
 *
 *     deno run -A bench/profile_cell.ts --engine builtin --model identity_large \
 *       --protocol grpc --concurrency 1 [--window 3000] [--top 12] [--out x.cpuprofile] \
 *       [--shm 4194304]
 *
 * `--shm <bytes>` sends the tensors through system shared memory (perf_analyzer
 * `--shared-memory system --output-shared-memory-size <bytes>`).
 *
 * @module
 */

import { findPerfAnalyzer, PYTHON } from "../tests/_peers.ts";
import { runPerf } from "./perf.ts";
import { bottomUp, profileWhile } from "./profile.ts";
import { startServer } from "./process.ts";
import { flag } from "./args.ts";
import { serverCommand } from "./servers.ts";

if (import.meta.main) {
  const engine = flag("engine", "builtin");
  const model = flag("model", "identity_large");
  const protocol = flag("protocol", "grpc") as "http" | "grpc";
  const concurrency = Number(flag("concurrency", "1"));
  const windowMs = Number(flag("window", "3000"));
  const out = flag("out", "");
  const shm = flag("shm", "");
  const perf = await findPerfAnalyzer(PYTHON);
  if ("missing" in perf) {
    console.error(`profile_cell: no perf_analyzer: ${perf.missing}`);
    Deno.exit(1);
  }
  const inspect = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const inspectPort = (inspect.addr as Deno.NetAddr).port;
  inspect.close();
  if (engine !== "builtin" && engine !== "triton") {
    console.error(`profile_cell: unknown engine '${engine}' (builtin, triton)`);
    Deno.exit(1);
  }
  await using server = await startServer(
    serverCommand(engine, { models: [model], inspect: inspectPort }),
  );
  const cell = (ms: number): ReturnType<typeof runPerf> =>
    runPerf({
      path: perf.path,
      env: perf.env,
      model,
      url: `127.0.0.1:${protocol === "http" ? server.ports.http : server.ports.grpc}`,
      protocol,
      concurrency,
      windowMs: ms,
      windows: 3,
      timeoutMs: 120_000,
      extraArgs: shm === ""
        ? []
        : ["--shared-memory", "system", "--output-shared-memory-size", shm],
    });
  await cell(1000).catch(() => undefined); // warm-up: JIT, connections, first allocations
  let result: Awaited<ReturnType<typeof runPerf>> | undefined;
  const profile = await profileWhile(`127.0.0.1:${inspectPort}`, async () => {
    result = await cell(windowMs);
  });
  console.log(
    `${engine} ${model}${shm === "" ? "" : " shm"} ${protocol} c${concurrency}: ` +
      `${result!.throughput} infer/s ` +
      `(windows ${result!.windows.join(", ")}), p50 ${result!.p50Us} us`,
  );
  console.log(bottomUp(profile, Number(flag("top", "12")), 4).join("\n"));
  if (out !== "") await Deno.writeTextFile(out, JSON.stringify(profile));
}
