/**
 * One HTTP thread (a Deno Worker started by `threads.ts`): it listens on the front end's port
 * through `reusePort`, so the kernel spreads connections over the threads.
 * Inference requests are read, decoded, encoded and compressed here. On the Triton engine they
 * are also submitted here, straight into the core the main isolate shares (`EngineShare`), once
 * the main isolate has checked their model; on the built-in engine the engine call crosses to
 * the main isolate. Every other request, and an inference request this thread cannot
 * decode on its own (a raw binary body needs the model's inputs, shared memory lives in the main
 * isolate, and a malformed one must get the main isolate's answer), is forwarded there whole.
 *
 * @module
 */

/// <reference lib="deno.worker" />

import type { InferenceResponse, SharedEngineClient } from "../../engine/engine.ts";
import { fromWireError, toWireError } from "../../isolate/codec.ts";
import { Logger, type LogLevel } from "../../log.ts";
import { openSharedEngine } from "../../engine/share.ts";
import { type RouteContext, type RouteHandler, Router } from "./router.ts";
import { decodeInferRequest, type HttpInferRequest } from "./infer_request.ts";
import {
  type InferBody,
  inferDecodeOptions,
  inferReply,
  MODEL_PATH,
  readInferBody,
  versionOf,
} from "./routes.ts";
import { handlerOver, routeSettingsOf, socketUnavailable } from "./server.ts";
import { SlotTable } from "../../slot_set.ts";
import { RingReader, RingWriter } from "../../isolate/ring.ts";
import { readAnswer, writeInferRequest } from "./thread_lane.ts";
import {
  type CheckedModel,
  type FromThread,
  fromWireInferResponse,
  type ModelRef,
  type ThreadSettings,
  type ToThread,
  toWireInferRequest,
} from "./thread_protocol.ts";

interface Waiting {
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

// Slots, not a Map: one entry per request comes and goes (see slot_set.ts); the id the main
// isolate answers by names the slot.
const waiting = new SlotTable<Waiting>();
let server: Deno.HttpServer<Deno.NetAddr> | undefined;
let logger: Logger | undefined;
/** The shared Triton core, until the main isolate detaches the thread from it. */
let shared: SharedEngineClient | undefined;
/** Models the main isolate checked, for requests submitted to the shared core. */
const checked = new Map<string, CheckedModel>();
/** The ring of the inference requests this thread hands to the main isolate. */
let requests: RingWriter | undefined;

function post(message: FromThread, transfer: Transferable[] = []): void {
  self.postMessage(message, transfer);
}

/**
 * Logs an error nothing else caught in this thread. Such an error is a bug, but it must not end
 * the thread: Deno frees a Worker's memory when it ends, and the Triton core may still be reading
 * the inputs this thread lent it (a read there crashes the whole process), and the thread's
 * connections would drop. So it is logged, and the thread goes on serving.
 */
function uncaught(kind: string, error: unknown): void {
  const text = `HTTP thread: ${kind}: ${
    error instanceof Error ? error.stack ?? error.message : String(error)
  }`;
  if (logger !== undefined) logger.error(text);
  else console.error(text);
}
self.addEventListener("error", (event) => {
  event.preventDefault();
  uncaught("uncaught error", event.error ?? event.message);
});
self.addEventListener("unhandledrejection", (event) => {
  event.preventDefault();
  uncaught("unhandled rejection", event.reason);
});

/**
 * Sends (with `send`) what the main isolate answers by `id`; an abort of `signal` cancels it
 * there.
 */
function ask<T>(send: (id: number) => void, signal?: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let id = 0;
    const onAbort = (): void => post({ type: "cancel", id });
    signal?.addEventListener("abort", onAbort);
    id = waiting.add({
      resolve: (value) => {
        signal?.removeEventListener("abort", onAbort);
        resolve(value as T);
      },
      reject: (error) => {
        signal?.removeEventListener("abort", onAbort);
        reject(error);
      },
    });
    send(id);
  });
}

/**
 * Forwards a request to the main isolate's handler. A body already read (and decompressed)
 * replaces the request's own, without the headers that described the original.
 */
function forward(request: Request, read?: Uint8Array, signal?: AbortSignal): Promise<Response> {
  const headers = [...request.headers].filter(([name]) =>
    read === undefined || (name !== "content-encoding" && name !== "content-length")
  );
  // Bodies the front end reads are in ArrayBuffers (never shared).
  const body = (read as Uint8Array<ArrayBuffer> | undefined) ?? request.body;
  const transfer: Transferable[] = body === null
    ? []
    : body instanceof Uint8Array
    ? [body.buffer as ArrayBuffer]
    : [body];
  return ask<Response>(
    (id) =>
      post(
        { type: "forward", id, method: request.method, url: request.url, headers, body },
        transfer,
      ),
    signal,
  );
}

function modelRef(params: RouteContext["params"]): ModelRef {
  const modelVersion = versionOf(params);
  return modelVersion === undefined
    ? { modelName: params["model"]! }
    : { modelName: params["model"]!, modelVersion };
}

function checkModel(model: ModelRef): Promise<CheckedModel> {
  return ask<CheckedModel>((id) => post({ type: "check", id, model }));
}

function modelKey(model: ModelRef): string {
  return `${model.modelName}\0${model.modelVersion ?? ""}`;
}

/** The model as the main isolate checked it, asked once per model and version. */
async function checkedModel(model: ModelRef): Promise<CheckedModel> {
  const key = modelKey(model);
  let found = checked.get(key);
  if (found === undefined) {
    found = await checkModel(model);
    checked.set(key, found);
  }
  return found;
}

/**
 * Runs a decoded request on the shared core. A failure forgets the model's check and asks again,
 * so that a model unloaded meanwhile gets the main isolate's answer, not the core's.
 */
async function inferShared(
  client: SharedEngineClient,
  model: ModelRef,
  decoded: HttpInferRequest,
): Promise<{ response: InferenceResponse; batching: boolean }> {
  const found = await checkedModel(model);
  try {
    return {
      response: await client.infer(decoded.request, found.outputs),
      batching: found.batching,
    };
  } catch (error) {
    checked.delete(modelKey(model));
    await checkModel(model);
    throw error;
  }
}

function inferRoute(settings: ReturnType<typeof routeSettingsOf>): RouteHandler {
  return async (context) => {
    const { request, params } = context;
    const model = modelRef(params);
    let read: InferBody;
    try {
      read = await readInferBody(request, settings.maxRequestBytes);
    } catch (error) {
      // The main isolate looks the model up before it reads the body: its error comes first.
      await checkModel(model);
      throw error;
    }
    // A raw binary body is decoded against the model's inputs, which live in the main isolate.
    if (read.headerLength === 0) return forward(request, read.body, context.signal);
    let decoded: HttpInferRequest;
    try {
      decoded = decodeInferRequest(
        read.body,
        read.headerLength,
        inferDecodeOptions(settings, context),
      );
    } catch {
      return forward(request, read.body, context.signal);
    }
    // A model with sequence batching is served through the main isolate, whose engine keeps its
    // sequences' idle clocks and checks their correlation IDs.
    if (shared !== undefined && !(await checkedModel(model)).sequenceBatching) {
      const { response, batching } = await inferShared(shared, model, decoded);
      return await inferReply(decoded, response, {
        acceptEncoding: request.headers.get("accept-encoding"),
        batching,
      });
    }
    const { response, batching } = await ask<{ response: InferenceResponse; batching: boolean }>(
      (id) => {
        if (requests !== undefined && writeInferRequest(requests, id, model, decoded.request)) {
          return;
        }
        const transfer: Transferable[] = [];
        const wire = toWireInferRequest(decoded.request, transfer);
        post({ type: "infer", id, model, request: wire }, transfer);
      },
      context.signal,
    );
    return await inferReply(decoded, response, {
      acceptEncoding: request.headers.get("accept-encoding"),
      batching,
    });
  };
}

async function start(index: number, settings: ThreadSettings): Promise<void> {
  const { settings: log, prefix, relay } = settings.log;
  const line = (level: LogLevel) => (message: string): void =>
    post({ type: "log", level, message });
  logger = new Logger({
    prefix: `${prefix}/http${index}`,
    // A logger of the user's own lives in the main isolate: the lines travel there.
    ...(relay === true
      ? {
        sink: {
          error: line("error"),
          warn: line("warning"),
          info: line("info"),
          debug: line("verbose"),
        },
      }
      : log.file === undefined
      ? {}
      : { file: log.file }),
  });
  const { file: _file, ...change } = log;
  logger.update(change);
  if (settings.lanes !== undefined) {
    requests = new RingWriter(settings.lanes.toMain);
    void new RingReader(settings.lanes.toThread).pump((_kind, payload) => {
      const answer = readAnswer(payload);
      settle(
        answer.id,
        "error" in answer
          ? { error: fromWireError(answer.error) }
          : { value: { response: answer.response, batching: answer.batching } },
      );
    }, (error) => uncaught("reading an answer", error));
  }
  const pattern = settings.headerForwardPattern;
  const routeSettings = routeSettingsOf({
    maxRequestBytes: settings.maxRequestBytes,
    ...(pattern === undefined
      ? {}
      : { headerForwardPattern: new RegExp(pattern.source, pattern.flags) }),
  });
  const router = new Router<RouteHandler>().add(
    "POST",
    `${MODEL_PATH}/infer`,
    { group: "inference", handler: inferRoute(routeSettings) },
  );
  const handler = handlerOver(router, {
    logger,
    ...(settings.security === undefined ? {} : { security: settings.security }),
    ...(settings.cors === undefined ? {} : { cors: settings.cors }),
    ...(routeSettings.headerForwardPattern === undefined
      ? {}
      : { headerForwardPattern: routeSettings.headerForwardPattern }),
    unmatched: (request) => forward(request),
  });
  try {
    if (settings.engine !== undefined) {
      shared = await openSharedEngine(
        settings.engine,
        (report) => post({ type: "settle", report }),
      );
      logger.debug(1, "Inference requests go straight to the Triton core");
    }
    try {
      server = Deno.serve({
        hostname: settings.hostname,
        port: settings.port,
        reusePort: true,
        onListen: () => {},
      }, handler);
    } catch (error) {
      throw socketUnavailable(settings.hostname, settings.port, error);
    }
  } catch (error) {
    post({ type: "start-failed", error: toWireError(error) });
    return;
  }
  post({ type: "listening", port: server.addr.port });
}

function settle(id: number, outcome: { value: unknown } | { error: unknown }): void {
  const entry = waiting.delete(id);
  if (entry === undefined) return;
  if ("value" in outcome) entry.resolve(outcome.value);
  else entry.reject(outcome.error);
}

self.onmessage = (event: MessageEvent<ToThread>) => {
  const message = event.data;
  switch (message.type) {
    case "start":
      // Whatever fails while starting is the main isolate's to report: it waits for an answer.
      start(message.index, message.settings).catch((error) =>
        post({ type: "start-failed", error: toWireError(error) })
      );
      break;
    case "answer":
      settle(message.id, {
        value: new Response(message.body, {
          status: message.status,
          headers: message.headers as [string, string][],
        }),
      });
      break;
    case "inferred":
      settle(message.id, {
        value: { response: fromWireInferResponse(message.response), batching: message.batching },
      });
      break;
    case "checked":
      settle(message.id, { value: message.model });
      break;
    case "detach": {
      const client = shared;
      shared = undefined;
      post({ type: "detached" });
      void (async () => {
        await client?.close();
        post({ type: "released" });
      })();
      break;
    }
    case "failed":
      settle(message.id, { error: fromWireError(message.error) });
      break;
    case "log-settings":
      logger?.update(message.change);
      break;
    case "stop":
      void (async () => {
        await server?.shutdown();
        logger?.close();
        post({ type: "stopped" });
      })();
      break;
  }
};
