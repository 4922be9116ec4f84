/**
 * The shared-memory extension's HTTP routes, system (`/v2/systemsharedmemory/...`) and CUDA
 * (`/v2/cudasharedmemory/...`), over the server's one registry: status, register and unregister,
 * with Triton 2.51's bodies, messages and statuses (`http_server.cc`). Without a registry (a
 * front end on a bare engine) the same paths answer as a server that cannot register: an empty
 * list, 404 for a region, 501 for a registration.
 *
 * @module
 */

import { InferenceError } from "../../errors.ts";
import { byteCount, REGISTER_REQUEST } from "../../protocol/shared_memory.ts";
import type { SharedMemoryRegistry } from "../../shm/registry.ts";
import { jsonResponse } from "./errors.ts";
import { readJsonBody } from "./json_body.ts";
import { BODY_ERRORS, errorResponses, jsonContent, type RouteDoc, schemaRef } from "./route_doc.ts";
import type { RouteHandler, Router } from "./router.ts";

type Kind = "system" | "cuda";

const PREFIX: Readonly<Record<Kind, string>> = {
  system: "/v2/systemsharedmemory",
  cuda: "/v2/cudasharedmemory",
};
const TITLE: Readonly<Record<Kind, string>> = { system: "system", cuda: "CUDA" };
const STATUS_SCHEMA: Readonly<Record<Kind, string>> = {
  system: "SystemSharedMemoryStatus",
  cuda: "CudaSharedMemoryStatus",
};
const REGISTER_SCHEMA: Readonly<Record<Kind, string>> = {
  system: "SystemSharedMemoryRegisterRequest",
  cuda: "CudaSharedMemoryRegisterRequest",
};

/** The size of a `cudaIpcMemHandle_t`. */
const IPC_HANDLE_BYTES = 64;

function empty(): Response {
  return new Response(null, { status: 200 });
}

function nonNegative(body: Record<string, unknown>, key: string): number | undefined {
  const value = body[key];
  return value === undefined ? undefined : byteCount(value, key, REGISTER_REQUEST);
}

function required(body: Record<string, unknown>, key: string): number {
  const value = nonNegative(body, key);
  if (value === undefined) {
    throw InferenceError.invalidArg(`Shared memory register request has no '${key}' field`);
  }
  return value;
}

/**
 * The `cudaIpcMemHandle_t` of a CUDA register request: `raw_handle` is `{"b64": <base64>}`,
 * decoding to the handle's 64 bytes, with Triton's messages.
 *
 * @param body The register request.
 * @returns The handle.
 * @throws {InferenceError} (INVALID_ARG) For a missing, malformed or wrong-sized handle.
 *
 * @example A handle of 64 bytes, and the refusals
 * ```ts
 * import { rawHandleOf } from "./shared_memory_routes.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(rawHandleOf({ raw_handle: { b64: btoa("x".repeat(64)) } }).byteLength, 64);
 * assert.throws(
 *   () => rawHandleOf({ raw_handle: { b64: btoa("short") } }),
 *   /'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t/,
 * );
 * assert.throws(() => rawHandleOf({}), /Shared memory register request has no 'raw_handle' field/);
 * ```
 */
export function rawHandleOf(body: Record<string, unknown>): Uint8Array {
  const raw = body["raw_handle"];
  if (raw === undefined) {
    throw InferenceError.invalidArg("Shared memory register request has no 'raw_handle' field");
  }
  const b64 = typeof raw === "object" && raw !== null ? (raw as { b64?: unknown }).b64 : undefined;
  if (typeof b64 !== "string") {
    throw InferenceError.invalidArg(
      `Unable to parse 'raw_handle' of ${REGISTER_REQUEST}: expected an object with a base64 string 'b64'`,
    );
  }
  let text: string;
  try {
    text = atob(b64);
  } catch {
    text = "";
  }
  if (text.length !== IPC_HANDLE_BYTES) {
    throw InferenceError.invalidArg(
      "'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t",
    );
  }
  return Uint8Array.from(text, (char) => char.charCodeAt(0));
}

function statusDoc(
  kind: Kind,
  operationId: string,
  summary: string,
  errors: Readonly<Record<number, string>> = {},
): RouteDoc {
  return {
    operationId,
    summary,
    responses: {
      200: { description: "The regions", content: jsonContent(schemaRef(STATUS_SCHEMA[kind])) },
      ...errorResponses(errors),
    },
  };
}

function registerDoc(kind: Kind, summary: string, errors: Record<number, string>): RouteDoc {
  return {
    operationId: `${kind}SharedMemoryRegister`,
    summary,
    requestBody: { required: true, content: jsonContent(schemaRef(REGISTER_SCHEMA[kind])) },
    responses: { 200: { description: "Registered" }, ...errorResponses(errors) },
  };
}

interface KindRoutes {
  status: (region?: string) => unknown;
  register: RouteHandler;
  unregister: (region?: string) => void;
  registerDoc: RouteDoc;
}

function add(router: Router<RouteHandler>, kind: Kind, routes: KindRoutes): void {
  const prefix = PREFIX[kind];
  const title = TITLE[kind];
  router
    .add(
      "GET",
      `${prefix}/status`,
      {
        group: "shared-memory",
        handler: () => Promise.resolve(jsonResponse(routes.status())),
        doc: statusDoc(
          kind,
          `${kind}SharedMemoryStatus`,
          `Every registered ${title} shared-memory region`,
        ),
      },
    )
    .add(
      "GET",
      `${prefix}/region/{region}/status`,
      {
        group: "shared-memory",
        handler: ({ params }) => Promise.resolve(jsonResponse(routes.status(params["region"]!))),
        doc: statusDoc(
          kind,
          `${kind}SharedMemoryRegionStatus`,
          `One ${title} shared-memory region`,
          {
            404:
              `No ${title} region of that name is registered (or the name is a region of the other kind)`,
          },
        ),
      },
    )
    .add(
      "POST",
      `${prefix}/region/{region}/register`,
      { group: "shared-memory", handler: routes.register, doc: routes.registerDoc },
    )
    .add(
      "POST",
      `${prefix}/unregister`,
      {
        group: "shared-memory",
        handler: () => {
          routes.unregister();
          return Promise.resolve(empty());
        },
        doc: {
          operationId: `${kind}SharedMemoryUnregisterAll`,
          summary: `Unregister every ${title} shared-memory region`,
          responses: {
            200: { description: "Unregistered" },
            ...(kind === "cuda"
              ? errorResponses({ 500: "The CUDA driver refused to close a region's mapping" })
              : {}),
          },
        },
      },
    )
    .add(
      "POST",
      `${prefix}/region/{region}/unregister`,
      {
        group: "shared-memory",
        handler: ({ params }) => {
          routes.unregister(params["region"]!);
          return Promise.resolve(empty());
        },
        doc: {
          operationId: `${kind}SharedMemoryUnregister`,
          summary: `Unregister one ${title} shared-memory region`,
          responses: {
            200: {
              description:
                "Unregistered (also when no region of this kind had that name); a region a request still uses is unmapped once that request is answered",
            },
            ...(kind === "cuda"
              ? errorResponses({ 500: "The CUDA driver refused to close the region's mapping" })
              : {}),
          },
        },
      },
    );
}

/**
 * Adds the shared-memory routes to a router: the registry's, or those of a server that cannot
 * register regions.
 *
 * @param router The HTTP route table.
 * @param registry The server's regions; `undefined` for none.
 * @param maxRequestBytes The body limit of a register request.
 *
 * @example Both kinds' routes
 * ```ts
 * import { addSharedMemoryRoutes } from "./shared_memory_routes.ts";
 * import { Router } from "./router.ts";
 * import type { RouteHandler } from "./router.ts";
 * import { SharedMemoryRegistry } from "../../shm/registry.ts";
 * import assert from "node:assert/strict";
 *
 * const router = new Router<RouteHandler>();
 * addSharedMemoryRoutes(router, new SharedMemoryRegistry(), 1024);
 * assert.equal(router.match("POST", "/v2/cudasharedmemory/region/r/register").kind, "found");
 * assert.equal(router.match("GET", "/v2/systemsharedmemory/status").kind, "found");
 * ```
 */
export function addSharedMemoryRoutes(
  router: Router<RouteHandler>,
  registry: SharedMemoryRegistry | undefined,
  maxRequestBytes: number,
): void {
  if (registry === undefined) {
    for (const kind of ["system", "cuda"] as const) addUnsupported(router, kind);
    return;
  }
  add(router, "system", {
    status: (region) => registry.status(region),
    unregister: (region) => registry.unregister(region),
    register: async ({ request, params }) => {
      const body = await readJsonBody(request, maxRequestBytes) ?? {};
      if (body["key"] === undefined) {
        throw InferenceError.invalidArg("Shared memory register request has no 'key' field");
      }
      if (typeof body["key"] !== "string") {
        throw InferenceError.invalidArg(
          "Unable to parse 'key' of the shared memory register request: expected a string",
        );
      }
      const byteSize = required(body, "byte_size");
      registry.register({
        name: params["region"]!,
        key: body["key"],
        offset: nonNegative(body, "offset") ?? 0,
        byteSize,
      });
      return empty();
    },
    registerDoc: registerDoc(
      "system",
      "Register a system shared-memory region (`shm_open` key, offset, size)",
      {
        ...BODY_ERRORS,
        501:
          "The server may not map shared memory (no --allow-ffi), or an unsupported Content-Encoding",
      },
    ),
  });
  add(router, "cuda", {
    status: (region) => registry.cudaStatus(region),
    unregister: (region) => registry.unregisterCuda(region),
    register: async ({ request, params }) => {
      const body = await readJsonBody(request, maxRequestBytes) ?? {};
      const rawHandle = rawHandleOf(body);
      const byteSize = required(body, "byte_size");
      const deviceId = required(body, "device_id");
      registry.registerCuda({ name: params["region"]!, rawHandle, deviceId, byteSize });
      return empty();
    },
    registerDoc: registerDoc(
      "cuda",
      "Register a CUDA shared-memory region (a `cudaIpcMemHandle_t` in base64, the device, the size)",
      {
        ...BODY_ERRORS,
        400:
          "The body is not valid, or the CUDA driver refuses the handle or the device, or the size is beyond the handle's allocation, or the server has no CUDA driver",
        501:
          "The server may not call the CUDA driver (no --allow-ffi), or an unsupported Content-Encoding",
      },
    ),
  });
}

/** The routes of a kind this front end cannot register: nothing is ever registered. */
function addUnsupported(router: Router<RouteHandler>, kind: Kind): void {
  const title = TITLE[kind];
  const label = kind === "cuda" ? "cuda" : "system";
  add(router, kind, {
    status: (region) => {
      if (region === undefined) return [];
      throw InferenceError.notFound(`Unable to find ${label} shared memory region: '${region}'`);
    },
    // Nothing can be registered, so unregistering always succeeds.
    unregister: () => {},
    register: () => {
      throw InferenceError.unsupported(
        `${title[0]!.toUpperCase()}${
          title.slice(1)
        } shared memory is not supported by this server: send tensors in the request body`,
      );
    },
    registerDoc: {
      ...registerDoc(kind, `Not supported: register a ${title} shared-memory region`, {
        501: "Always: send tensors in the request body",
      }),
      requestBody: { content: jsonContent(schemaRef(REGISTER_SCHEMA[kind])) },
    },
  });
}
