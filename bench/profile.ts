/**
 * CPU profiles of a DenoTriton server under one benchmark cell, taken over the V8 inspector
 * (`deno run --inspect`; this Deno has no `--cpu-prof`), and summarised as the top frames by
 * self time.
 *
 * @module
 */

/** A V8 CPU profile (`Profiler.stop`'s result). */
export interface CpuProfile {
  /** Call-tree nodes. */
  readonly nodes: readonly {
    readonly id: number;
    readonly callFrame: {
      readonly functionName: string;
      readonly url: string;
      readonly lineNumber: number;
    };
    readonly hitCount?: number;
  }[];
  /** Node id of each sample. */
  readonly samples?: readonly number[];
  /** µs between samples. */
  readonly timeDeltas?: readonly number[];
}

/** One frame's share of the samples. */
export interface TopFrame {
  /** `function (file:line)`. */
  readonly frame: string;
  /** Share of all samples, 0–1. */
  readonly selfShare: number;
}

/**
 * The frames with the most self time.
 *
 * @param profile The profile.
 * @param count How many frames.
 * @returns Frames, largest share first; idle and GC are kept (they explain time too).
 *
 * @example Two frames
 * ```ts
 * import assert from "node:assert/strict";
 * import { topFrames } from "./profile.ts";
 *
 * const frame = (functionName: string) => ({ functionName, url: "file:///a.ts", lineNumber: 0 });
 * const top = topFrames({
 *   nodes: [{ id: 1, callFrame: frame("a"), hitCount: 3 }, { id: 2, callFrame: frame("b"), hitCount: 1 }],
 * });
 * assert.deepEqual(top[0], { frame: "a (a.ts:1)", selfShare: 0.75 });
 * ```
 */
export function topFrames(profile: CpuProfile, count = 12): TopFrame[] {
  const hits = new Map<number, number>();
  if (profile.samples !== undefined && profile.samples.length > 0) {
    for (const id of profile.samples) hits.set(id, (hits.get(id) ?? 0) + 1);
  } else {
    for (const node of profile.nodes) hits.set(node.id, node.hitCount ?? 0);
  }
  const byFrame = new Map<string, number>();
  let total = 0;
  for (const node of profile.nodes) {
    const n = hits.get(node.id) ?? 0;
    if (n === 0) continue;
    const { functionName, url, lineNumber } = node.callFrame;
    const file = url === "" ? "" : ` (${url.split("/").at(-1)}:${lineNumber + 1})`;
    const frame = `${functionName || "(anonymous)"}${file}`;
    byFrame.set(frame, (byFrame.get(frame) ?? 0) + n);
    total += n;
  }
  return [...byFrame].sort((a, b) => b[1] - a[1]).slice(0, count)
    .map(([frame, n]) => ({ frame, selfShare: total === 0 ? 0 : n / total }));
}

/** A connection to a V8 inspector target. */
export class Inspector implements AsyncDisposable {
  #socket: WebSocket;
  #next = 1;
  #pending = new Map<number, PromiseWithResolvers<unknown>>();

  private constructor(socket: WebSocket) {
    this.#socket = socket;
    socket.onmessage = (event: MessageEvent): void => {
      const message = JSON.parse(String(event.data)) as {
        id?: number;
        result?: unknown;
        error?: { message: string };
      };
      const waiter = message.id === undefined ? undefined : this.#pending.get(message.id);
      if (waiter === undefined) return;
      this.#pending.delete(message.id!);
      if (message.error) waiter.reject(new Error(`Inspector: ${message.error.message}`));
      else waiter.resolve(message.result);
    };
    // A connection that ends fails what waits on it, rather than leaving it waiting forever.
    socket.onclose = (event: CloseEvent): void => {
      const error = new Error(
        `Inspector: the connection closed (code ${event.code}${
          event.reason === "" ? "" : `: ${event.reason}`
        }) with ${this.#pending.size} command(s) unanswered`,
      );
      for (const waiter of this.#pending.values()) waiter.reject(error);
      this.#pending.clear();
    };
  }

  /**
   * Connects to the first target of an inspector listening on `host:port`.
   *
   * @param hostPort Where `--inspect` listens.
   * @returns The connection.
   */
  static async connect(hostPort: string): Promise<Inspector> {
    const targets = await (await fetch(`http://${hostPort}/json/list`)).json() as {
      webSocketDebuggerUrl: string;
    }[];
    const socket = new WebSocket(targets[0]!.webSocketDebuggerUrl);
    await new Promise((resolve, reject) => {
      socket.onopen = resolve;
      socket.onerror = reject;
    });
    return new Inspector(socket);
  }

  /**
   * Sends a command.
   *
   * @param method CDP method.
   * @param params Its parameters.
   * @returns Its result.
   */
  send<T>(method: string, params: Record<string, unknown> = {}): Promise<T> {
    const id = this.#next++;
    const waiter = Promise.withResolvers<unknown>();
    this.#pending.set(id, waiter);
    this.#socket.send(JSON.stringify({ id, method, params }));
    return waiter.promise as Promise<T>;
  }

  /** Closes the connection. */
  [Symbol.asyncDispose](): Promise<void> {
    this.#socket.close();
    return Promise.resolve();
  }
}

/** A node of V8's sampling heap profile (`HeapProfiler.stopSampling`'s result). */
export interface HeapNode {
  /** The allocating frame. */
  readonly callFrame: {
    readonly functionName: string;
    readonly url: string;
    readonly lineNumber: number;
  };
  /** Bytes allocated by this frame itself (a sampled estimate). */
  readonly selfSize: number;
  /** Its callees. */
  readonly children: readonly HeapNode[];
}

/**
 * Samples the target's allocations while `work` runs, counting the objects the garbage
 * collector has freed again too: those are the garbage a request leaves.
 *
 * The profile is taken in segments of {@linkcode HEAP_SEGMENT_MS}, each stopped and its tree
 * kept: a profile that keeps collected objects lists every sample, and one of a few seconds of
 * serving (millions of samples) is a message larger than the inspector's WebSocket takes.
 *
 * @param hostPort Where `--inspect` listens.
 * @param work What to run while sampling.
 * @param options `survivors`: leave out what a scavenge freed, keeping only the objects that lived
 *   through one (those the scavenger copies, and promotes to the old space: the costly garbage).
 * @returns The root of the allocation tree: the segments' roots are its children.
 */
export async function allocationsWhile(
  hostPort: string,
  work: () => Promise<unknown>,
  options: { survivors?: boolean } = {},
): Promise<HeapNode> {
  await using inspector = await Inspector.connect(hostPort);
  await inspector.send("HeapProfiler.enable");
  const start = (): Promise<unknown> =>
    inspector.send("HeapProfiler.startSampling", {
      samplingInterval: 128,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: options.survivors !== true,
    });
  const stop = async (): Promise<HeapNode> =>
    (await inspector.send<{ profile: { head: HeapNode } }>("HeapProfiler.stopSampling"))
      .profile.head;
  let done = false;
  let failure: unknown;
  const running = work().then(
    () => done = true,
    (error) => {
      failure = error ?? new Error("The profiled work failed");
      done = true;
    },
  );
  const segments: HeapNode[] = [];
  await start();
  while (!done) {
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      running,
      new Promise((resolve) => timer = setTimeout(resolve, HEAP_SEGMENT_MS)),
    ]);
    clearTimeout(timer);
    // The target builds the segment's profile on its main thread, serving nothing meanwhile;
    // only the requests of the round trip to the next start go unsampled.
    segments.push(await stop());
    if (!done) await start();
  }
  if (failure !== undefined) throw failure;
  return {
    callFrame: { functionName: "(root)", url: "", lineNumber: 0 },
    selfSize: 0,
    children: segments,
  };
}

/** How long each segment of {@linkcode allocationsWhile}'s profile lasts, in milliseconds. */
export const HEAP_SEGMENT_MS = 500;

/**
 * Bytes allocated per frame (self), summed over the tree, largest first; a built-in's bytes are
 * named with the script frame that called it.
 *
 * @param head The allocation tree's root.
 * @returns `[frame, bytes]` pairs.
 */
export function allocationsByFrame(head: HeapNode): [string, number][] {
  const totals = new Map<string, number>();
  const name = ({ callFrame: { functionName, url, lineNumber } }: HeapNode): string =>
    `${functionName || "(anonymous)"}${
      url === "" ? "" : ` (${url.split("/").at(-1)}:${lineNumber + 1})`
    }`;
  // A built-in (Map, next, slice: no url) is named with the frame that called it.
  const stack: [HeapNode, string][] = [[head, ""]];
  while (stack.length > 0) {
    const [node, caller] = stack.pop()!;
    const own = name(node);
    const frame = node.callFrame.url === "" && caller !== "" ? `${own} < ${caller}` : own;
    if (node.selfSize > 0) totals.set(frame, (totals.get(frame) ?? 0) + node.selfSize);
    for (const child of node.children) {
      stack.push([child, node.callFrame.url === "" ? caller : own]);
    }
  }
  return [...totals].sort((a, b) => b[1] - a[1]);
}

/**
 * Profiles the target while `work` runs.
 *
 * @param hostPort Where `--inspect` listens.
 * @param work What to run while sampling.
 * @returns The profile.
 */
export function profileWhile(
  hostPort: string,
  work: () => Promise<unknown>,
): Promise<CpuProfile> {
  return sampleWhile(hostPort, work, {
    start: async (inspector) => {
      await inspector.send("Profiler.enable");
      await inspector.send("Profiler.setSamplingInterval", { interval: 250 });
      await inspector.send("Profiler.start");
    },
    stop: async (inspector) =>
      (await inspector.send<{ profile: CpuProfile }>("Profiler.stop")).profile,
  });
}

/** Starts a sampler over the inspector, runs `work`, and stops it (after a failure too). */
async function sampleWhile<T>(
  hostPort: string,
  work: () => Promise<unknown>,
  sampler: {
    start(inspector: Inspector): Promise<void>;
    stop(inspector: Inspector): Promise<T>;
  },
): Promise<T> {
  await using inspector = await Inspector.connect(hostPort);
  await sampler.start(inspector);
  let failure: unknown;
  try {
    await work();
  } catch (error) {
    failure = error ?? new Error("The profiled work failed");
  }
  // Stop even when the work failed, so the target is left as found.
  const result = await sampler.stop(inspector);
  if (failure !== undefined) throw failure;
  return result;
}

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
export function bottomUp(profile: CpuProfile, top: number, depth: number): string[] {
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
