/**
 * One peer's server process for one model: started on free ports and timed to its first right
 * answer (the same test for every peer: not every peer has a readiness endpoint, and one that
 * says ready may not answer yet), its process tree's memory read from `/proc`, and stopped with
 * every process it started.
 *
 * @module
 */

import { Http1Connection, jsonPost } from "./http1.ts";
import { exchange, type ModelName } from "./models.ts";
import type { PeerCommand, PeerPorts, PeerSpec } from "./peers.ts";

/** A running server. */
export interface PeerServer extends AsyncDisposable {
  /** The root process. */
  readonly pid: number;
  /** Its ports. */
  readonly ports: PeerPorts;
  /** ms from spawn to the first right answer. */
  readonly startupMs: number;
  /** Where its output goes. */
  readonly logFile: string;
  /** Stops it and every process it started: SIGINT, then SIGKILL after `graceMs`. */
  stop(): Promise<void>;
}

/** Options of {@linkcode startPeer}. */
export interface StartPeerOptions {
  /** Where stdout and stderr go. */
  readonly logFile: string;
  /**
   * Gives up after this many ms.
   *
   * @default {240000}
   */
  readonly readyTimeoutMs?: number;
  /**
   * How long a stopped server may take to exit before it is killed, ms.
   *
   * @default {30000}
   */
  readonly graceMs?: number;
}

function freePorts(): PeerPorts {
  const listeners = [0, 1, 2].map(() => Deno.listen({ hostname: "127.0.0.1", port: 0 }));
  const [http, grpc, metrics] = listeners.map((l) => (l.addr as Deno.NetAddr).port);
  for (const listener of listeners) listener.close();
  return { http: http!, grpc: grpc!, metrics: metrics! };
}

interface ProcStat {
  readonly ppid: number;
  /** Start time since boot, in clock ticks: tells a process from a later one with its pid. */
  readonly start: string;
}

function readStat(pid: number): ProcStat | undefined {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { ppid: Number(fields[1]), start: fields[19]! };
  } catch {
    return undefined;
  }
}

/**
 * The processes of a tree: the root and all its descendants, each with its start time.
 *
 * @param root The root pid.
 * @returns pid → start time.
 */
export function processTree(root: number): Map<number, string> {
  const children = new Map<number, number[]>();
  const starts = new Map<number, string>();
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    const pid = Number(entry.name);
    const stat = readStat(pid);
    if (stat === undefined) continue;
    starts.set(pid, stat.start);
    children.set(stat.ppid, [...(children.get(stat.ppid) ?? []), pid]);
  }
  const tree = new Map<number, string>();
  const stack = [root];
  while (stack.length > 0) {
    const pid = stack.pop()!;
    const start = starts.get(pid);
    if (start === undefined) continue;
    tree.set(pid, start);
    stack.push(...(children.get(pid) ?? []));
  }
  return tree;
}

/**
 * The proportional set size of a process tree: each page shared by n processes counts 1/n in
 * each, so forked workers' shared pages count once (the resident size counts them in each).
 *
 * @param root The root pid.
 * @returns Bytes (0 without `/proc`).
 */
export function treePssBytes(root: number): number {
  let total = 0;
  for (const pid of processTree(root).keys()) {
    try {
      const rollup = Deno.readTextFileSync(`/proc/${pid}/smaps_rollup`);
      total += Number(/^Pss:\s+(\d+) kB/m.exec(rollup)?.[1] ?? 0) * 1024;
    } catch {
      // The process ended meanwhile, or is not ours to read.
    }
  }
  return total;
}

/**
 * Whether the server answers one model request right.
 *
 * @param spec The peer.
 * @param model The model.
 * @param port Its HTTP port.
 * @returns `true` for a right answer.
 */
async function answersRight(spec: PeerSpec, model: ModelName, port: number): Promise<boolean> {
  const ex = exchange(spec.shape, model, 0, spec.path(model));
  let conn: Http1Connection | undefined;
  // Long enough for one 1M-element JSON inference on a slow peer: a retry would start it over.
  const timer = setTimeout(() => conn?.close(), 60_000);
  try {
    conn = await Http1Connection.open("127.0.0.1", port);
    const response = await conn.send(jsonPost(`127.0.0.1:${port}`, ex.path, ex.body));
    return response.status === 200 && ex.check(response.body) === undefined;
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
    conn?.close();
  }
}

/**
 * Starts a peer serving one model and waits for its first right answer.
 *
 * @param spec The peer.
 * @param model The model.
 * @param command How to start it, given its ports.
 * @param options The log file and limits.
 * @returns The running server.
 * @throws {Error} When it exits or does not answer in time; the message names its log.
 */
export async function startPeer(
  spec: PeerSpec,
  model: ModelName,
  command: (ports: PeerPorts) => PeerCommand,
  options: StartPeerOptions,
): Promise<PeerServer> {
  const { logFile } = options;
  const ports = freePorts();
  const { command: program, args, env, cwd } = command(ports);
  await Deno.mkdir(logFile.slice(0, logFile.lastIndexOf("/")), { recursive: true });
  const log = await Deno.open(logFile, { write: true, create: true, truncate: true });
  const started = performance.now();
  const child = new Deno.Command(program, {
    args: [...args],
    env: { ...env },
    cwd,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const pipes = Promise.all([
    child.stdout.pipeTo(log.writable, { preventClose: true }),
    child.stderr.pipeTo(log.writable, { preventClose: true }),
  ]).catch(() => {}).finally(() => log.close());
  let exited = false;
  const status = child.status.finally(() => {
    exited = true;
  });
  // Every process the server started, kept up to date while it runs: a worker whose parent
  // exits first is no longer found under the root, so it is remembered from before.
  const known = new Map<number, string>();
  const remember = (): void => {
    for (const [pid, start] of processTree(child.pid)) known.set(pid, start);
  };
  const watcher = setInterval(remember, 1000);
  const stop = async (): Promise<void> => {
    clearInterval(watcher);
    if (!exited) {
      remember();
      try {
        child.kill("SIGINT");
      } catch {
        // It exited meanwhile.
      }
      const timer = setTimeout(() => {
        try {
          child.kill("SIGKILL");
        } catch {
          // It exited meanwhile.
        }
      }, options.graceMs ?? 30_000);
      await status;
      clearTimeout(timer);
    }
    // What is left of the tree (workers that outlived their parent) goes too, by pid, each
    // only if it is still the process that was seen.
    await new Promise((resolve) => setTimeout(resolve, 500));
    for (const [pid, start] of known) {
      if (pid === child.pid || readStat(pid)?.start !== start) continue;
      try {
        Deno.kill(pid, "SIGKILL");
      } catch {
        // It ended meanwhile.
      }
    }
    await pipes;
  };
  const deadline = started + (options.readyTimeoutMs ?? 240_000);
  try {
    for (;;) {
      if (exited) throw new Error(`${spec.name} exited before answering: see ${logFile}`);
      if (performance.now() > deadline) {
        throw new Error(`${spec.name} did not answer ${model} in time: see ${logFile}`);
      }
      if (await answersRight(spec, model, ports.http)) break;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  } catch (error) {
    await stop();
    throw error;
  }
  const startupMs = performance.now() - started;
  remember();
  return {
    pid: child.pid,
    ports,
    startupMs,
    logFile,
    stop,
    [Symbol.asyncDispose]: stop,
  };
}
