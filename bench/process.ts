/**
 * The benchmark's server processes: start one on free ports, time it to ready, read the
 * resident memory of its process tree, stop it.
 *
 * @module
 */

/** The ports a server listens on. */
export interface Ports {
  /** HTTP/REST. */
  readonly http: number;
  /** gRPC. */
  readonly grpc: number;
  /** Prometheus metrics. */
  readonly metrics: number;
}

/**
 * Ports that were free a moment ago (each listened on once and closed).
 *
 * @returns Three distinct ports.
 */
export function freePorts(): Ports {
  const listeners = [0, 1, 2].map(() => Deno.listen({ hostname: "127.0.0.1", port: 0 }));
  const ports = listeners.map((listener) => (listener.addr as Deno.NetAddr).port);
  for (const listener of listeners) listener.close();
  return { http: ports[0]!, grpc: ports[1]!, metrics: ports[2]! };
}

/** A running server. */
export interface ServerProcess extends AsyncDisposable {
  /** The root process. */
  readonly pid: number;
  /** Where it listens. */
  readonly ports: Ports;
  /** ms from spawn to `/v2/health/ready` answering 200. */
  readonly healthReadyMs: number;
  /** ms from spawn to every model's `/v2/models/<m>/ready` answering 200. */
  readonly modelsReadyMs: number;
  /** Stops it: SIGINT, then SIGKILL after a grace period. */
  stop(): Promise<void>;
}

/** How to start a server. */
export interface ServerCommand {
  /** The program. */
  readonly command: string;
  /** Its arguments, given the ports. */
  readonly args: (ports: Ports) => string[];
  /** Extra environment. */
  readonly env?: Readonly<Record<string, string>>;
  /** The models that must be ready. */
  readonly models: readonly string[];
  /** Where its stdout and stderr go. */
  readonly logFile: string;
  /**
   * Gives up after this many ms.
   *
   * @default {180000}
   */
  readonly readyTimeoutMs?: number;
}

async function answers200(url: string): Promise<boolean> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(2000) });
    await response.body?.cancel();
    return response.status === 200;
  } catch {
    return false;
  }
}

/**
 * Starts a server and waits until it and all its models are ready.
 *
 * @param spec What to run.
 * @returns The running server.
 * @throws {Error} When it exits or is not ready in time; the message names the log file.
 */
export async function startServer(spec: ServerCommand): Promise<ServerProcess> {
  const ports = freePorts();
  // A fresh clone has no log directory yet (bench/.work is ignored by git).
  await Deno.mkdir(spec.logFile.slice(0, spec.logFile.lastIndexOf("/")) || ".", {
    recursive: true,
  });
  await Deno.writeTextFile(spec.logFile, "");
  const start = performance.now();
  const child = new Deno.Command(spec.command, {
    args: spec.args(ports),
    env: { ...spec.env },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  // Both streams append to one log file.
  const sink = async (stream: ReadableStream<Uint8Array>): Promise<void> => {
    const file = await Deno.open(spec.logFile, { append: true });
    await stream.pipeTo(file.writable);
  };
  const piping = Promise.all([sink(child.stdout), sink(child.stderr)]);
  let exited = false;
  const status = child.status.then((s) => {
    exited = true;
    return s;
  });
  const stop = async (): Promise<void> => {
    if (!exited) {
      try {
        child.kill("SIGINT");
      } catch {
        // It exited meanwhile.
      }
      const timer = setTimeout(() => {
        try {
          if (!exited) child.kill("SIGKILL");
        } catch {
          // It exited meanwhile.
        }
      }, 30_000);
      await status;
      clearTimeout(timer);
    }
    await piping.catch(() => {});
  };
  const base = `http://127.0.0.1:${ports.http}`;
  const deadline = start + (spec.readyTimeoutMs ?? 180_000);
  let healthReadyMs: number | undefined;
  try {
    for (;;) {
      if (exited) throw new Error(`Server exited before ready: see ${spec.logFile}`);
      if (performance.now() > deadline) throw new Error(`Server not ready: see ${spec.logFile}`);
      if (healthReadyMs === undefined && await answers200(`${base}/v2/health/ready`)) {
        healthReadyMs = performance.now() - start;
      }
      if (healthReadyMs !== undefined) {
        const ready = await Promise.all(
          spec.models.map((model) => answers200(`${base}/v2/models/${model}/ready`)),
        );
        if (ready.every(Boolean)) break;
      }
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  } catch (error) {
    await stop();
    throw error;
  }
  const modelsReadyMs = performance.now() - start;
  return {
    pid: child.pid,
    ports,
    healthReadyMs,
    modelsReadyMs,
    stop,
    [Symbol.asyncDispose]: stop,
  };
}

/**
 * The first line a child process writes (a server announcing where it listens), read from its
 * decoded stdout; the reader stays open for the rest.
 *
 * @param lines The child's stdout, decoded.
 * @returns The line without its newline, or `undefined` when the output ended before one.
 *
 * @example
 * ```ts
 * import { firstLine } from "./process.ts";
 * import assert from "node:assert/strict";
 *
 * const reader = ReadableStream.from(["listening", " on 80\nmore\n"]).getReader();
 * assert.equal(await firstLine(reader), "listening on 80");
 * ```
 */
export async function firstLine(
  lines: ReadableStreamDefaultReader<string>,
): Promise<string | undefined> {
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await lines.read();
    if (done) return undefined;
    text += value;
  }
  return text.slice(0, text.indexOf("\n"));
}

/**
 * CPU seconds (user + system) used so far, from a `/proc` stat file: `/proc/<pid>/stat` for a
 * process (all its threads), `/proc/<pid>/task/<tid>/stat` for one thread.
 *
 * @param statPath The stat file.
 * @returns The seconds; NaN when the file cannot be read (no `/proc`).
 */
export function cpuSeconds(statPath: string): number {
  try {
    const stat = Deno.readTextFileSync(statPath);
    // Fields after the parenthesized command name; utime and stime are fields 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return NaN;
  }
}

/** What the threads of one name in a process used so far. */
export interface ThreadGroup {
  /** CPU seconds, user + system. */
  seconds: number;
  /** Context switches, voluntary and not. */
  switches: number;
  /** How many threads have the name. */
  threads: number;
}

/**
 * The threads of a process grouped by name (`/proc/<pid>/task/<tid>/comm`, cut to 15 characters
 * by Linux): their CPU seconds and context switches so far. A thread that ended is no longer
 * counted, one that started is counted whole.
 *
 * @param pid The process.
 * @returns The groups by name; empty when `/proc` cannot be read.
 */
export function threadsByName(pid: number): Map<string, ThreadGroup> {
  const groups = new Map<string, ThreadGroup>();
  let tasks: Deno.DirEntry[];
  try {
    tasks = [...Deno.readDirSync(`/proc/${pid}/task`)];
  } catch {
    return groups;
  }
  for (const task of tasks) {
    const dir = `/proc/${pid}/task/${task.name}`;
    let name: string;
    let status: string;
    try {
      name = Deno.readTextFileSync(`${dir}/comm`).trimEnd();
      status = Deno.readTextFileSync(`${dir}/status`);
    } catch {
      continue; // The thread ended meanwhile.
    }
    const seconds = cpuSeconds(`${dir}/stat`);
    if (Number.isNaN(seconds)) continue;
    const switches = [...status.matchAll(/ctxt_switches:\s+(\d+)/g)]
      .reduce((sum, match) => sum + Number(match[1]), 0);
    const group = groups.get(name);
    if (group === undefined) groups.set(name, { seconds, switches, threads: 1 });
    else {
      group.seconds += seconds;
      group.switches += switches;
      group.threads++;
    }
  }
  return groups;
}

/**
 * CPU seconds (user + system) used so far by the threads of a process whose name starts with
 * `prefix`: V8's helper threads are `V8 DefaultWorker` (`V8 DefaultWorke` in `/proc`), where its
 * background compiler and parallel garbage collection run.
 *
 * @param pid The process.
 * @param prefix The start of the threads' name.
 * @returns The seconds; NaN when `/proc` cannot be read.
 */
export function threadsCpuSeconds(pid: number, prefix: string): number {
  const groups = threadsByName(pid);
  if (groups.size === 0) return NaN;
  let sum = 0;
  for (const [name, group] of groups) if (name.startsWith(prefix)) sum += group.seconds;
  return sum;
}

/**
 * Sums one number from the `/proc/<pid>/stat` of a process and all its descendants.
 *
 * @param root The root pid.
 * @param value Reads the number from the stat fields after the command name (state first).
 * @returns The sum (0 when `/proc` cannot be read).
 */
function sumOverTree(root: number, value: (fields: readonly string[]) => number): number {
  const children = new Map<number, number[]>();
  const values = new Map<number, number>();
  try {
    for (const entry of Deno.readDirSync("/proc")) {
      if (!/^\d+$/.test(entry.name)) continue;
      try {
        const stat = Deno.readTextFileSync(`/proc/${entry.name}/stat`);
        // Fields after the command name, which may hold spaces: state ppid ...
        const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
        const pid = Number(entry.name);
        const ppid = Number(fields[1]);
        values.set(pid, value(fields));
        children.set(ppid, [...(children.get(ppid) ?? []), pid]);
      } catch {
        // The process ended while we looked.
      }
    }
  } catch {
    return 0;
  }
  let total = 0;
  const stack = [root];
  while (stack.length > 0) {
    const pid = stack.pop()!;
    total += values.get(pid) ?? 0;
    stack.push(...(children.get(pid) ?? []));
  }
  return total;
}

/**
 * The resident memory of a process and all its descendants, from `/proc`.
 *
 * @param root The root pid.
 * @returns Bytes (0 when `/proc` cannot be read).
 */
export function treeRssBytes(root: number): number {
  // rss (in pages) is field 24 of the stat file.
  return sumOverTree(root, (fields) => Number(fields[21]) * 4096);
}

/**
 * CPU seconds (user + system) used so far by a process and all its live descendants (PyTriton
 * serves from several), from `/proc`.
 *
 * @param root The root pid.
 * @returns The seconds (0 when `/proc` cannot be read).
 */
export function treeCpuSeconds(root: number): number {
  // utime and stime are fields 14 and 15 of the stat file.
  return sumOverTree(root, (fields) => (Number(fields[11]) + Number(fields[12])) / 100);
}

/**
 * Samples {@linkcode treeRssBytes} every `intervalMs` until stopped, keeping the peak.
 *
 * @param root The root pid.
 * @param intervalMs Sampling period.
 * @returns `stop()`, which returns the peak in bytes.
 */
export function sampleRss(root: number, intervalMs = 250): { stop(): number } {
  let peak = treeRssBytes(root);
  const timer = setInterval(() => {
    peak = Math.max(peak, treeRssBytes(root));
  }, intervalMs);
  return {
    stop(): number {
      clearInterval(timer);
      return Math.max(peak, treeRssBytes(root));
    },
  };
}
