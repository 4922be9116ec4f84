/**
 * The Prometheus metrics endpoint: `GET /metrics` on its own port, like Triton's port 8002.
 *
 * @module
 */

import type { Engine } from "../../engine/engine.ts";
import type { Logger } from "../../log.ts";

/** Options of {@linkcode MetricsFrontend.start}. */
export interface MetricsFrontendOptions {
  /**
   * Address to listen on.
   *
   * @default {"0.0.0.0"}
   */
  hostname?: string;
  /**
   * Port; 0 picks a free one.
   *
   * @default {8002}
   */
  port?: number;
  /**
   * Where to log failures.
   *
   * @default {undefined}
   */
  logger?: Logger;
}

/**
 * Serves the engine's Prometheus text at `GET /metrics`.
 *
 * @example Scrape the metrics
 * ```ts
 * import { MetricsFrontend } from "./server.ts";
 * import type { Engine } from "../../engine/engine.ts";
 * import assert from "node:assert/strict";
 *
 * const engine = { metrics: () => "# HELP x y\n" } as unknown as Engine;
 * await using metrics = await MetricsFrontend.start(engine, { hostname: "127.0.0.1", port: 0 });
 * const response = await fetch(`${metrics.url}/metrics`);
 * assert.equal(await response.text(), "# HELP x y\n");
 * ```
 */
export class MetricsFrontend implements AsyncDisposable {
  #server: Deno.HttpServer<Deno.NetAddr>;
  #hostname: string;
  #closed = false;

  private constructor(server: Deno.HttpServer<Deno.NetAddr>, hostname: string) {
    this.#server = server;
    this.#hostname = hostname;
  }

  /**
   * Starts listening.
   *
   * @param engine The engine whose metrics are served.
   * @param options Address and port.
   * @returns The running front end.
   */
  static start(engine: Engine, options: MetricsFrontendOptions = {}): Promise<MetricsFrontend> {
    const hostname = options.hostname ?? "0.0.0.0";
    const { promise, resolve } = Promise.withResolvers<void>();
    const server = Deno.serve({
      hostname,
      port: options.port ?? 8002,
      onListen: () => resolve(),
      onError: (error) => {
        options.logger?.error(`Metrics endpoint failed: ${error}`);
        return Response.json({ error: String(error) }, { status: 500 });
      },
    }, (request) => {
      const path = new URL(request.url).pathname;
      if (path !== "/metrics") return Response.json({ error: "Not Found" }, { status: 404 });
      if (request.method !== "GET") {
        return Response.json({ error: `Method ${request.method} is not allowed for /metrics` }, {
          status: 405,
        });
      }
      return new Response(engine.metrics(), {
        headers: { "content-type": "text/plain; charset=utf-8" },
      });
    });
    return promise.then(() => new MetricsFrontend(server, hostname));
  }

  /** The bound port. */
  get port(): number {
    return this.#server.addr.port;
  }

  /** Base URL, e.g. `http://127.0.0.1:8002`. */
  get url(): string {
    const host = this.#hostname === "0.0.0.0" ? "127.0.0.1" : this.#hostname;
    return `http://${host.includes(":") ? `[${host}]` : host}:${this.port}`;
  }

  /** Stops listening. Idempotent. */
  async shutdown(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#server.shutdown();
  }

  /** Same as {@linkcode MetricsFrontend.shutdown}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.shutdown();
  }
}
