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
import { type CpuProfile, profileWhile } from "./profile.ts";
import { startServer } from "./process.ts";
import { flag } from "./args.ts";
import { serverCommand } from "./servers.ts";

type Node = CpuProfile["nodes"][number] & { readonly children?: readonly number[] };

function frameName(node: Node): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const file = url === "" ? "" : ` (${url.split("/").at(-1)}:${lineNumber + 1})`;
  return `${functionName || "(anonymous)"}${file}`;
}

/**
 * The top frames by self time, each with its most frequent caller paths.
 *
 * @param profile The profile.
 * @param top How many frames.
 * @param depth How many callers per path.
 * @returns Lines to print.
 */
function bottomUp(profile: CpuProfile, top: number, depth: number): string[] {
  const nodes = new Map<number, Node>();
  const parent = new Map<number, number>();
  for (const node of profile.nodes as readonly Node[]) {
    nodes.set(node.id, node);
    for (const child of node.children ?? []) parent.set(child, node.id);
  }
  const hits = new Map<number, number>();
  for (const id of profile.samples ?? []) hits.set(id, (hits.get(id) ?? 0) + 1);
  let total = 0;
  const self = new Map<string, number>();
  const paths = new Map<string, Map<string, number>>();
  for (const [id, count] of hits) {
    total += count;
    const node = nodes.get(id)!;
    const name = frameName(node);
    self.set(name, (self.get(name) ?? 0) + count);
    const chain: string[] = [];
    for (let at = parent.get(id); at !== undefined && chain.length < depth; at = parent.get(at)) {
      const caller = nodes.get(at)!;
      if (caller.callFrame.functionName === "(root)") break;
      chain.push(frameName(caller));
    }
    const byPath = paths.get(name) ?? new Map<string, number>();
    const key = chain.join(" < ");
    byPath.set(key, (byPath.get(key) ?? 0) + count);
    paths.set(name, byPath);
  }
  const lines: string[] = [];
  const share = (n: number): string => `${(100 * n / total).toFixed(1).padStart(5)}%`;
  for (const [name, count] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    lines.push(`${share(count)}  ${name}`);
    const callers = [...paths.get(name)!].sort((a, b) => b[1] - a[1]).slice(0, 3);
    for (const [path, n] of callers) if (path !== "") lines.push(`        ${share(n)} < ${path}`);
  }
  return lines;
}

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
