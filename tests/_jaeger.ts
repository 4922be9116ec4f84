/**
 * A real OpenTelemetry collector for the tests: Jaeger v2 (`.ci/run` builds it from its Go
 * module into `.cache/jaeger/`; `DENOTRITON_JAEGER` names another binary), started with a
 * configuration of its own on free ports: OTLP/HTTP in, its in-memory store, and its query API,
 * which the tests read traces back from.
 *
 * @module
 */

import { fileURLToPath } from "node:url";

/** The version `.ci/run` builds. */
export const JAEGER_VERSION = "v1.76.0";

/** Where the Jaeger binary is, if it is there. */
export const JAEGER: string | undefined = (() => {
  const named = Deno.env.get("DENOTRITON_JAEGER");
  const path = named ??
    fileURLToPath(new URL(`../.cache/jaeger/jaeger-${JAEGER_VERSION}`, import.meta.url));
  try {
    return Deno.statSync(path).isFile ? path : undefined;
  } catch {
    return undefined;
  }
})();

/** A running collector. */
export interface Jaeger extends AsyncDisposable {
  /** The OTLP/HTTP traces endpoint (`.../v1/traces`). */
  readonly otlpTraces: string;
  /** The query API's base URL. */
  readonly query: string;
}

async function get(url: string): Promise<{ ok: boolean; text: string }> {
  const response = await fetch(url);
  return { ok: response.ok, text: await response.text() };
}

function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

/**
 * Starts Jaeger on free ports and waits until its query API answers.
 *
 * @returns The collector (stop it with `await using`).
 */
export async function startJaeger(): Promise<Jaeger> {
  if (JAEGER === undefined) {
    throw new Error("Jaeger is not built (run .ci/run or set DENOTRITON_JAEGER)");
  }
  const [otlp, http, grpc] = [freePort(), freePort(), freePort()];
  const dir = await Deno.makeTempDir({ prefix: "denotriton-jaeger-" });
  const config = `${dir}/config.yaml`;
  await Deno.writeTextFile(
    config,
    `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    # Jaeger traces its own queries to localhost:4317 by default, and its shutdown then waits
    # 10 s on an export to nowhere.
    enable_tracing: false
    storage:
      traces: memory
    http:
      endpoint: 127.0.0.1:${http}
    grpc:
      endpoint: 127.0.0.1:${grpc}
  jaeger_storage:
    backends:
      memory:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${otlp}
exporters:
  jaeger_storage_exporter:
    trace_storage: memory
`,
  );
  const child = new Deno.Command(JAEGER, {
    args: ["--config", config],
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const log: string[] = [];
  const reading = (async () => {
    for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) log.push(chunk);
  })();
  const query = `http://127.0.0.1:${http}`;
  const stop = async (): Promise<void> => {
    try {
      child.kill("SIGTERM");
    } catch {
      // already gone
    }
    await child.status;
    await reading.catch(() => {});
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  };
  const deadline = Date.now() + 30_000;
  while (true) {
    try {
      if ((await get(`${query}/api/services`)).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`Jaeger did not start in 30 s:\n${log.join("")}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    otlpTraces: `http://127.0.0.1:${otlp}/v1/traces`,
    query,
    [Symbol.asyncDispose]: stop,
  };
}

/** A span as Jaeger's query API answers it. */
export interface JaegerSpan {
  readonly traceID: string;
  readonly spanID: string;
  readonly operationName: string;
  readonly references: readonly { refType: string; traceID: string; spanID: string }[];
  readonly tags: readonly { key: string; type: string; value: unknown }[];
  readonly processID: string;
}

/** A trace as Jaeger's query API answers it. */
export interface JaegerTrace {
  readonly traceID: string;
  readonly spans: readonly JaegerSpan[];
  readonly processes: Readonly<Record<string, { serviceName: string }>>;
}

/**
 * Reads a trace back, waiting (up to `ms`) until it has at least `spans` spans: spans reach the
 * collector in batches, from each isolate's exporter.
 *
 * @param jaeger The collector.
 * @param traceId The trace.
 * @param spans How many spans to wait for.
 * @param ms How long to wait at most.
 * @returns The trace.
 */
export async function traceOf(
  jaeger: Jaeger,
  traceId: string,
  spans: number,
  ms = 30_000,
): Promise<JaegerTrace> {
  const deadline = Date.now() + ms;
  let last: JaegerTrace | undefined;
  while (true) {
    const response = await get(`${jaeger.query}/api/traces/${traceId}`);
    if (response.ok) {
      last = (JSON.parse(response.text) as { data: JaegerTrace[] }).data[0];
      if (last !== undefined && last.spans.length >= spans) return last;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `Jaeger has ${last?.spans.length ?? 0} spans of trace ${traceId}, expected ${spans}: ${
          JSON.stringify(last?.spans.map((span) => span.operationName))
        }`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * How many spans of a trace Jaeger has now (0 when it does not know the trace).
 *
 * @param jaeger The collector.
 * @param traceId The trace.
 * @returns The count.
 */
export async function spanCount(jaeger: Jaeger, traceId: string): Promise<number> {
  const response = await get(`${jaeger.query}/api/traces/${traceId}`);
  if (!response.ok) return 0;
  return (JSON.parse(response.text) as { data: JaegerTrace[] }).data[0]?.spans.length ?? 0;
}

/**
 * A span's tags as an object.
 *
 * @param span The span.
 * @returns Its tags by key.
 */
export function tagsOf(span: JaegerSpan): Record<string, unknown> {
  return Object.fromEntries(span.tags.map((tag) => [tag.key, tag.value]));
}
