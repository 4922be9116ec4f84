/**
 * Profiles one cell of `bench:engines` (issue 38): serves `examples/add_sub` the way
 * `bench/engines_http.ts --serve` does, under `--inspect`, drives it with that script's closed-loop
 * JSON client in its own process, and prints what the server's main thread spends per request:
 * the process's CPU µs per request (all threads, and the main thread), the V8 profile's self time
 * per file and per frame as µs per request of main-thread CPU (share of the non-idle samples times
 * the main thread's CPU per request), and the top frames bottom-up with their callers.
 *
 *     deno run -A bench/profile_engines.ts --server builtin|triton|echo [--concurrency 8]
 *       [--client-processes 1] [--duration 4] [--warmup 1] [--queue-delay-us 0] [--http-threads 1] [--top 25]
 *       [--files 15] [--out x.cpuprofile] [--heap 1|survivors] [--by-thread]
 *
 * `--warmup S` drives the server S seconds before anything is measured (V8 optimizes on helper
 * threads meanwhile; see `engines_http.ts`'s `--settle`). `--by-thread` profiles nothing: it
 * prints the server's CPU µs and context switches per request by thread name (Linux `/proc`), the
 * main thread, the HTTP threads (`worker-N`), V8's helpers, and the Triton core's own threads
 * (named after the thread that started them: `tokio-runtime-w`, Deno's blocking pool, where the
 * core was created).
 *
 * `--heap 1` samples allocations instead of CPU (V8's sampling heap profiler, freed objects
 * counted) and prints the bytes allocated per request by frame: the garbage each request leaves.
 * `--heap survivors` counts only what lived through a scavenge: the objects the scavenger copies
 * and promotes, whose garbage only a mark-compact frees (the costly kind).
 *
 * The sampling profiler adds its own cost, so the µs here are larger than `bench:engines`'s; they
 * say where the time goes, `bench:engines` says how much. V8 counts the time Deno spends in Rust
 * between JavaScript calls (hyper parsing a request, say) as idle, so the per-file figures spread
 * the main thread's whole CPU over the busy samples and overstate each file by that part: most of
 * the echo's CPU is such time, a fifth or less of the engines'. Only the main isolate is profiled (the
 * inspector's first target): with `--http-threads` above 1 the HTTP threads are not in it.
 *
 * @module
 */

import { flag } from "./args.ts";
import {
  allocationsByFrame,
  allocationsWhile,
  bottomUp,
  type CpuProfile,
  profileWhile,
} from "./profile.ts";
import { cpuSeconds, firstLine, threadsByName } from "./process.ts";

const ENGINES = new URL("./engines_http.ts", import.meta.url).pathname;

/** Self µs per request of main-thread CPU, by a key of each sample's frame. */
function selfByKey(
  profile: CpuProfile,
  key: (frame: CpuProfile["nodes"][number]["callFrame"]) => string,
  usPerSample: number,
): [string, number][] {
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const totals = new Map<string, number>();
  for (const id of profile.samples ?? []) {
    const name = key(nodes.get(id)!.callFrame);
    totals.set(name, (totals.get(name) ?? 0) + usPerSample);
  }
  return [...totals].sort((a, b) => b[1] - a[1]);
}

/** V8's idle samples: the thread waited (`(program)`, native work outside JS, is kept). */
const isIdle = (functionName: string): boolean => functionName === "(idle)";

/** Profiles the cell the flags name. */
async function main(): Promise<void> {
  const server = flag("server", "builtin");
  const concurrency = flag("concurrency", "8");
  const duration = Number(flag("duration", "4"));
  const threads = flag("http-threads", "1");
  const inspect = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const inspectPort = (inspect.addr as Deno.NetAddr).port;
  inspect.close();
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      `--inspect=127.0.0.1:${inspectPort}`,
      ...(threads === "1" ? [] : ["--unstable-net"]),
      ENGINES,
      "--serve",
      server,
      "--http-threads",
      threads,
      "--queue-delay-us",
      flag("queue-delay-us", "0"),
    ],
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  try {
    const line = await firstLine(lines);
    if (line === undefined) throw new Error(`The ${server} server exited before it served`);
    const { url } = JSON.parse(line) as { url: string };
    // Several client processes, started together, load a many-core host as bench:engines does.
    const clientProcesses = Number(flag("client-processes", "1"));
    const driveOne = async (seconds: number): Promise<number> => {
      const output = await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          ENGINES,
          "--drive",
          url,
          "--servers",
          server,
          "--clients",
          "identity",
          "--concurrency",
          concurrency,
          "--duration",
          String(seconds),
        ],
        stdout: "piped",
        stderr: "inherit",
      }).output();
      if (!output.success) throw new Error("The client process failed");
      const load = JSON.parse(new TextDecoder().decode(output.stdout)) as { latencies: number[] };
      return load.latencies.length;
    };
    const drive = async (seconds: number): Promise<number> => {
      const counts = await Promise.all(
        Array.from({ length: clientProcesses }, () => driveOne(seconds)),
      );
      return counts.reduce((sum, count) => sum + count, 0);
    };
    await drive(Number(flag("warmup", "1"))); // warm-up: JIT, connections
    if (flag("by-thread", "") !== "") {
      const before = threadsByName(child.pid);
      const requests = await drive(duration);
      const after = threadsByName(child.pid);
      console.log(
        `${server} ${clientProcesses}×c=${concurrency} threads=${threads}: ${requests} requests; by thread name, ` +
          "CPU µs and context switches per request:",
      );
      const rows = [...after].map(([name, group]) => {
        const was = before.get(name) ?? { seconds: 0, switches: 0, threads: 0 };
        return {
          name,
          us: Math.max(0, group.seconds - was.seconds) * 1e6 / requests,
          // A thread that ended meanwhile takes its counts along (see threadsByName).
          switches: Math.max(0, group.switches - was.switches) / requests,
          threads: group.threads,
        };
      }).sort((a, b) => b.us - a.us);
      for (const row of rows) {
        console.log(
          `${row.us.toFixed(1).padStart(7)} µs  ${row.switches.toFixed(2).padStart(5)} switches  ` +
            `${row.name} (${row.threads} thread${row.threads === 1 ? "" : "s"})`,
        );
      }
      const total = rows.reduce((sum, row) => sum + row.us, 0);
      console.log(`${total.toFixed(1).padStart(7)} µs  all threads`);
      return;
    }
    if (flag("heap", "") !== "") {
      let requests = 0;
      const survivors = flag("heap", "") === "survivors";
      const head = await allocationsWhile(`127.0.0.1:${inspectPort}`, async () => {
        requests = await drive(duration);
      }, { survivors });
      const frames = allocationsByFrame(head);
      const total = frames.reduce((sum, [, bytes]) => sum + bytes, 0);
      console.log(
        `${server} ${clientProcesses}×c=${concurrency}: ${requests} requests, ${
          Math.round(total / requests)
        } bytes ${
          survivors ? "per request that outlived a scavenge" : "allocated per request"
        } (sampled, the main isolate)`,
      );
      for (const [frame, bytes] of frames.slice(0, Number(flag("top", "25")))) {
        console.log(`${String(Math.round(bytes / requests)).padStart(7)} B/req  ${frame}`);
      }
      return;
    }
    const mainStat = `/proc/${child.pid}/task/${child.pid}/stat`;
    let requests = 0;
    let cpu = 0;
    let mainCpu = 0;
    let seconds = 0;
    const profile = await profileWhile(`127.0.0.1:${inspectPort}`, async () => {
      // The client process takes a moment to start: CPU is read around the whole drive, so
      // the per-request figures include the idle start (small against `duration`).
      const before = [cpuSeconds(`/proc/${child.pid}/stat`), cpuSeconds(mainStat)];
      const start = performance.now();
      requests = await drive(duration);
      seconds = (performance.now() - start) / 1000;
      cpu = cpuSeconds(`/proc/${child.pid}/stat`) - before[0]!;
      mainCpu = cpuSeconds(mainStat) - before[1]!;
    });
    const busy = (profile.samples ?? []).filter((id) =>
      !isIdle(
        profile.nodes.find((node) => node.id === id)!.callFrame.functionName,
      )
    ).length;
    const mainUs = 1e6 * mainCpu / requests;
    const usPerSample = busy === 0 ? 0 : mainUs / busy;
    console.log(
      `${server} ${clientProcesses}×c=${concurrency} threads=${threads}: ${requests} requests in ${
        seconds.toFixed(1)
      } s (${Math.round(requests / seconds)} req/s under the profiler), server CPU ${
        Math.round(1e6 * cpu / requests)
      } µs/req, main thread ${Math.round(mainUs)} µs/req, ${busy} busy samples`,
    );
    const nodesById = new Map(profile.nodes.map((node) => [node.id, node]));
    const idle = (profile.samples ?? []).length - busy;
    console.log(`idle samples: ${idle}`);
    const nonIdle: CpuProfile = {
      nodes: profile.nodes,
      samples: (profile.samples ?? []).filter((id) =>
        !isIdle(nodesById.get(id)!.callFrame.functionName)
      ),
    };
    console.log("\nmain-thread self µs/request by file:");
    const byFile = selfByKey(
      nonIdle,
      (frame) =>
        frame.url === ""
          ? `(${frame.functionName || "native"})`
          : frame.url.split("/").slice(-2).join("/"),
      usPerSample,
    );
    for (const [file, us] of byFile.slice(0, Number(flag("files", "15")))) {
      console.log(`${us.toFixed(1).padStart(7)}  ${file}`);
    }
    console.log("\ntop frames (share of busy samples), bottom-up:");
    console.log(bottomUp(nonIdle, Number(flag("top", "25")), 4).join("\n"));
    const out = flag("out", "");
    if (out !== "") await Deno.writeTextFile(out, JSON.stringify(profile));
  } finally {
    await child.stdin.close().catch(() => {});
    lines.releaseLock();
    await child.stdout.cancel().catch(() => {});
    await child.status;
  }
}

if (import.meta.main) await main();
