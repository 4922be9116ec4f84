/**
 * The KServe v2 HTTP front end on `Deno.serve`, wire-compatible with Triton 2.51's: health,
 * metadata, model config, statistics, repository, inference (JSON and the binary tensor
 * extension, gzip/deflate), plus answers for shared memory, trace and logging.
 *
 * @module
 */

import type { Engine } from "../../engine/engine.ts";
import { engineRepository, type ModelRepository } from "../../engine/repository.ts";
import {
  InferenceError,
  messageOf,
  TritonPermissionError,
  TritonValidationError,
} from "../../errors.ts";
import { HttpThreads } from "./threads.ts";
import { compileHeaderForwardPattern } from "../../protocol/request_parameters.ts";
import { Logger } from "../../log.ts";
import { errorResponse, errorToResponse } from "./errors.ts";
import { LateCalls, RequestContext } from "./disconnect_watch.ts";
import type { RouteHandler, Router } from "./router.ts";
import { buildRoutes, type RouteSettings, runHandler } from "./routes.ts";
import { type AccessCheck, httpAccessCheck } from "./access.ts";
import { Cors, type CorsSettings, resolveCorsSettings } from "./cors.ts";
import { addDocRoutes } from "./docs_page.ts";
import type { ResolvedSecurityConfig } from "../../config/security_config.ts";
import type { SharedMemoryRegistry } from "../../shm/registry.ts";
import type { Tracer } from "../../telemetry/tracer.ts";
import { pathOf } from "./url_path.ts";

export type { EndpointGroup } from "./router.ts";

/** Options of the HTTP front end. */
export interface HttpFrontendOptions {
  /**
   * The address to bind.
   *
   * @default {"0.0.0.0"}
   */
  hostname?: string;
  /**
   * The port; 0 picks a free one.
   *
   * @default {8000}
   */
  port?: number;
  /**
   * Headers whose names match (case-insensitively) are added to the request parameters as
   * strings.
   *
   * @default {undefined}
   */
  headerForwardPattern?: string | RegExp;
  /**
   * The largest request body, compressed or decompressed; bigger bodies get 413.
   *
   * @default {67108864}
   */
  maxRequestBytes?: number;
  /**
   * The logger.
   *
   * @default {new Logger()}
   */
  logger?: Logger;
  /**
   * Access control per endpoint group (restricted APIs, access tokens).
   *
   * @default {undefined}
   */
  accessCheck?: AccessCheck;
  /**
   * The models the repository extension loads, unloads and lists.
   *
   * @default {engineRepository(engine): the models the engine loaded}
   */
  repository?: ModelRepository;
  /**
   * The server's system shared-memory regions (shared with the gRPC front end); without it the
   * shared-memory endpoints answer "not supported".
   *
   * @default {undefined}
   */
  sharedMemory?: SharedMemoryRegistry;
  /**
   * The server's tracer (the engine's too): the trace extension reads and changes its settings.
   * Without one, the settings read as Triton's defaults and a change answers 501.
   *
   * @default {undefined}
   */
  tracer?: Tracer;
  /**
   * The token and restricted endpoint groups; the access check is built from them unless
   * `accessCheck` is given. Threads beyond the first need this form: a function cannot reach them.
   *
   * @default {undefined}
   */
  security?: ResolvedSecurityConfig;
  /**
   * Cross-origin calls from browsers: the origins allowed (exact, or `*`), whether credentials
   * are, and how long a preflight's answer may be kept. Without origins, nothing changes.
   *
   * @default {undefined}
   */
  cors?: CorsSettings;
  /**
   * Serve the docs page at `/docs` (Swagger UI over `/v2/openapi.json`, which is always served).
   *
   * @default {true}
   */
  docs?: boolean;
  /**
   * How many threads serve HTTP (Triton's `--http-thread-count`): at 1 the main isolate; above
   * that, as many Workers, each listening on the port through `reusePort` (which needs Deno's
   * `--unstable-net` flag), while the main isolate keeps to the engine. A Worker decodes and
   * encodes inference requests itself and submits them to the engine when it can share it (the
   * Triton core), else hands the engine call to the main isolate; every other request it
   * forwards there whole.
   *
   * @default {1}
   */
  threads?: number;
}

const DEFAULT_MAX_REQUEST_BYTES = 64 * 1024 * 1024;

/**
 * How long an inference request runs (up to twice that) before its client's disconnect is
 * watched, in ms: short enough that a model feels a disconnect while it still matters, long
 * enough that most small requests are answered first and never pay for the signal.
 */
const LINK_DELAY_MS = 20;

/**
 * Builds the request handler of the KServe v2 HTTP API over an engine, usable with any
 * `Deno.serve` (or called directly in tests).
 *
 * @param engine The engine.
 * @param options Header forwarding, body limit, logger and access control.
 * @returns The handler.
 *
 * @example Unknown paths
 * ```ts
 * import { createHttpHandler } from "./server.ts";
 * import type { Engine } from "../../engine/engine.ts";
 * import assert from "node:assert/strict";
 *
 * const handler = createHttpHandler({} as Engine);
 * const response = await handler(new Request("http://localhost/v3/nothing"));
 * assert.equal(response.status, 404);
 * assert.deepEqual(await response.json(), { error: "Not Found" });
 * ```
 */
export function createHttpHandler(
  engine: Engine,
  options: HttpFrontendOptions = {},
): (request: Request) => Promise<Response> {
  const logger = options.logger ?? new Logger();
  const router = httpRouter(engine, { ...options, logger });
  const pattern = routeSettingsOf(options).headerForwardPattern;
  const cors = resolveCorsSettings(options.cors);
  const { cors: _cors, headerForwardPattern: _pattern, ...rest } = options;
  return handlerOver(router, {
    ...rest,
    logger,
    ...(cors === undefined ? {} : { cors }),
    ...(pattern === undefined ? {} : { headerForwardPattern: pattern }),
  });
}

/**
 * The route table the front end serves over an engine: the KServe v2 routes, the OpenAPI
 * document that describes them (`/v2/openapi.json`) and the docs page.
 *
 * @param engine The engine.
 * @param options The front end's options (body limit, header forwarding, logger, repository,
 *   shared memory, security for the document, the docs page).
 * @returns The router.
 *
 * @example Every route describes itself
 * ```ts
 * import { httpRouter } from "./server.ts";
 * import type { Engine } from "../../engine/engine.ts";
 * import assert from "node:assert/strict";
 *
 * const router = httpRouter({} as Engine);
 * assert.ok(router.routes.every((route) => route.doc !== undefined));
 * ```
 */
export function httpRouter(
  engine: Engine,
  options: HttpFrontendOptions = {},
): Router<RouteHandler> {
  const repository = options.repository ?? engineRepository(engine);
  const router = buildRoutes(engine, {
    ...routeSettingsOf(options),
    logger: options.logger ?? new Logger(),
    repository,
    ...(options.sharedMemory !== undefined ? { sharedMemory: options.sharedMemory } : {}),
    ...(options.tracer !== undefined ? { tracer: options.tracer } : {}),
  });
  const security = options.security;
  // Every table the front end serves is described: a table added here joins `tables`.
  return addDocRoutes(router, {
    tables: [router],
    engine,
    repository,
    // httpAccessCheck restricts nothing without a token.
    restricted: security?.accessToken === undefined ? new Set() : security.restrictedEndpoints,
    docsPage: options.docs ?? true,
  });
}

/**
 * The body limit and header forwarding of the routes.
 *
 * @param options The front end's options.
 * @returns Those route settings.
 */
export function routeSettingsOf(
  options: Pick<HttpFrontendOptions, "maxRequestBytes" | "headerForwardPattern">,
): Pick<RouteSettings, "maxRequestBytes" | "headerForwardPattern"> {
  return {
    maxRequestBytes: options.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES,
    headerForwardPattern: compileHeaderForwardPattern(
      options.headerForwardPattern,
      "HTTP headerForwardPattern",
    ),
  };
}

/** What {@linkcode handlerOver} needs beside the routes. */
export interface HandlerOptions {
  /** The logger. */
  readonly logger: Logger;
  /** A custom access check. */
  readonly accessCheck?: AccessCheck;
  /** The access check's data, when there is no custom one. */
  readonly security?: ResolvedSecurityConfig;
  /**
   * Answers requests no route matches (an HTTP thread forwards them to the main isolate); the
   * default answers 404 or 405.
   */
  readonly unmatched?: (request: Request) => Promise<Response>;
  /** CORS, resolved ({@linkcode resolveCorsSettings}); none when undefined. */
  readonly cors?: Required<CorsSettings>;
  /** Forwarded headers, which a cross-origin call may send too. */
  readonly headerForwardPattern?: RegExp;
}

/**
 * The request handler over a route table: matching, access control, the disconnect signal and
 * the one error mapping. Shared by the main isolate and the HTTP threads.
 *
 * @param router The routes.
 * @param options Logger, access control and what answers unmatched requests.
 * @returns The handler.
 */
export function handlerOver(
  router: Router<RouteHandler>,
  options: HandlerOptions,
): (request: Request) => Promise<Response> {
  const { logger, unmatched } = options;
  const accessCheck = options.accessCheck ??
    (options.security === undefined ? undefined : httpAccessCheck(options.security));
  const lateLinks = new LateCalls(LINK_DELAY_MS);
  const handle = async (request: Request): Promise<Response> => {
    const path = pathOf(request.url);
    logger.debug(1, () => `HTTP request: ${request.method} ${path}`);
    const found = router.match(request.method, path);
    if (found.kind !== "found" && unmatched !== undefined) return unmatched(request);
    if (found.kind === "not-found") return errorResponse(404, "Not Found");
    if (found.kind === "method-not-allowed") {
      return errorResponse(405, "Method Not Allowed", { allow: found.allowed.join(", ") });
    }
    const { group, handler } = found.kind === "found" ? found.route : found.fallback;
    // Deno.serve's request.signal also aborts after every successful response (and warns once
    // when read: see legacy_abort.ts), so it is read only by the routes that need it
    // (inference), and only a disconnect while the request is being handled reaches the engine.
    // Reading it is not free, so it is watched only once the request has run for a while
    // (disconnect_watch.ts); a client that left before that is seen then, as the signal is
    // already aborted when first read.
    const context = new RequestContext(
      request,
      found.kind === "found" ? found.params : {},
      lateLinks,
    );
    try {
      if (accessCheck !== undefined && group !== undefined) {
        const refused = await accessCheck(request, group);
        if (refused !== undefined) return refused;
      }
      return await runHandler(handler, context);
    } catch (error) {
      if (!(error instanceof InferenceError)) {
        logger.error(
          `HTTP ${request.method} ${path} failed: ${
            error instanceof Error ? error.stack ?? error.message : String(error)
          }`,
        );
      } else {
        logger.debug(1, () => `HTTP ${request.method} ${path}: ${error.message}`);
      }
      return errorToResponse(error);
    } finally {
      context.end();
    }
  };
  if (options.cors === undefined) return handle;
  const cors = new Cors(options.cors, options.headerForwardPattern);
  const methodsAt = (path: string): readonly string[] => router.methodsAt(path);
  return async (request: Request): Promise<Response> => {
    if (cors.isPreflight(request)) {
      // A path this table lacks may be the main isolate's (an HTTP thread's table is partial).
      if (unmatched !== undefined && methodsAt(pathOf(request.url)).length === 0) {
        return unmatched(request);
      }
      return cors.preflight(request, methodsAt);
    }
    return cors.decorate(request, await handle(request));
  };
}

/**
 * The error for a listener that could not bind, on the main isolate or an HTTP thread.
 *
 * @param hostname The address asked for.
 * @param port The port asked for.
 * @param cause What `Deno.serve` threw.
 * @returns An UNAVAILABLE error naming the socket.
 */
export function socketUnavailable(hostname: string, port: number, cause: unknown): InferenceError {
  return InferenceError.unavailable(
    `Cannot start the HTTP front end: socket '${hostname}:${port}' is unavailable: ${
      messageOf(cause)
    }`,
    { cause },
  );
}

/**
 * The HTTP front end: `Deno.serve` running {@linkcode createHttpHandler} on the main isolate, or
 * on `threads` Workers.
 *
 * @example Serve on a free port
 * ```ts
 * import { HttpFrontend } from "./server.ts";
 * import type { Engine } from "../../engine/engine.ts";
 * import assert from "node:assert/strict";
 *
 * const engine = { isLive: () => true } as unknown as Engine;
 * await using frontend = await HttpFrontend.start(engine, { port: 0, hostname: "127.0.0.1" });
 * const response = await fetch(`${frontend.url}/v2/health/live`);
 * assert.equal(response.status, 200);
 * await response.body?.cancel();
 * ```
 */
export class HttpFrontend implements AsyncDisposable {
  #hostname: string;
  #port: number;
  /** The main isolate's server, or the threads that listen instead of it. */
  #listener: Deno.HttpServer<Deno.NetAddr> | HttpThreads;
  #logger: Logger;
  #stopping: Promise<void> | undefined;

  private constructor(
    listener: Deno.HttpServer<Deno.NetAddr> | HttpThreads,
    address: { readonly hostname: string; readonly port: number },
    logger: Logger,
  ) {
    this.#hostname = address.hostname;
    this.#port = address.port;
    this.#listener = listener;
    this.#logger = logger;
  }

  /**
   * Starts serving.
   *
   * @param engine The engine to serve.
   * @param options Address, port and handler options.
   * @returns The running front end.
   * @throws {InferenceError} (UNAVAILABLE) When the address is in use or cannot be bound.
   * @throws {TritonPermissionError} When `threads` is above 1 without `--unstable-net`.
   */
  static async start(engine: Engine, options: HttpFrontendOptions = {}): Promise<HttpFrontend> {
    const logger = options.logger ?? new Logger();
    const hostname = options.hostname ?? "0.0.0.0";
    const port = options.port ?? 8000;
    const threads = options.threads ?? 1;
    if (!Number.isInteger(threads) || threads < 1) {
      throw new TritonValidationError(
        `Cannot start the HTTP front end: threads must be an integer >= 1, got ${threads}`,
      );
    }
    if (threads > 1 && options.accessCheck !== undefined) {
      throw new TritonValidationError(
        "Cannot start the HTTP front end: an accessCheck function cannot run on its other threads; give security instead",
      );
    }
    // Without the flag, Deno ends the process at a reusePort listen instead of throwing; the
    // flag's other APIs, such as Deno.listenDatagram, exist only with it.
    if (
      threads > 1 && typeof (Deno as { listenDatagram?: unknown }).listenDatagram !== "function"
    ) {
      throw new TritonPermissionError(
        `DenoTriton needs --unstable-net for ${threads} HTTP threads (httpThreadCount): they share the port through reusePort`,
      );
    }
    const cors = resolveCorsSettings(options.cors);
    const handler = createHttpHandler(engine, { ...options, logger });
    if (threads > 1) {
      // The Workers alone listen: the main isolate runs the engine and what they forward.
      const { maxRequestBytes, headerForwardPattern: pattern } = routeSettingsOf(options);
      const listeners = await HttpThreads.start({
        count: threads,
        settings: {
          hostname,
          port,
          maxRequestBytes,
          ...(pattern === undefined
            ? {}
            : { headerForwardPattern: { source: pattern.source, flags: pattern.flags } }),
          log: { settings: logger.settings, prefix: logger.prefix, relay: logger.hasSink },
          ...(options.security === undefined ? {} : { security: options.security }),
          ...(cors === undefined ? {} : { cors }),
        },
        engine,
        handler,
        logger,
      });
      return new HttpFrontend(listeners, { hostname, port: listeners.port }, logger);
    }
    let server: Deno.HttpServer<Deno.NetAddr>;
    try {
      server = Deno.serve({ hostname, port, onListen: () => {} }, handler);
    } catch (error) {
      throw socketUnavailable(hostname, port, error);
    }
    return new HttpFrontend(server, server.addr, logger);
  }

  /** The bound port. */
  get port(): number {
    return this.#port;
  }

  /** A URL clients on this host can use, e.g. `http://127.0.0.1:8000`. */
  get url(): string {
    let host = this.#hostname;
    if (host === "0.0.0.0") host = "127.0.0.1";
    else if (host === "::") host = "[::1]";
    else if (host.includes(":")) host = `[${host}]`;
    return `http://${host}:${this.port}`;
  }

  /** Stops accepting connections and waits for in-flight requests. Idempotent. */
  shutdown(): Promise<void> {
    // The threads' requests in flight still need the main isolate, which answers them until
    // every thread has stopped.
    const listener = this.#listener;
    this.#stopping ??= (listener instanceof HttpThreads ? listener.stop() : listener.shutdown())
      .then(() => {
        this.#logger.debug(1, "HTTP front end stopped");
      });
    return this.#stopping;
  }

  /** Same as {@linkcode HttpFrontend.shutdown}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.shutdown();
  }
}
