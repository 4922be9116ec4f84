/**
 * Token-based access restriction of the gRPC front end's endpoint groups. A call to a restricted
 * RPC must carry the token in the `triton-grpc-protocol-triton-access-token` metadata key:
 * without it the call ends with UNAUTHENTICATED, with a different token PERMISSION_DENIED
 * (Triton answers UNAVAILABLE for both, with a TODO to use UNAUTHENTICATED). Tokens are compared
 * in constant time.
 *
 * @module
 */

import grpc from "@grpc/grpc-js";
import {
  type EndpointGroup,
  type ResolvedSecurityConfig,
  tokensEqual,
} from "../../config/security_config.ts";
import type { GrpcService } from "./service.ts";

/** The gRPC metadata key that carries the access token. */
export const GRPC_ACCESS_TOKEN_KEY = "triton-grpc-protocol-triton-access-token";

/** The endpoint group of every RPC of the inference and health services. */
export const RPC_GROUPS: Readonly<Record<string, EndpointGroup>> = Object.freeze({
  Check: "health",
  ServerLive: "health",
  ServerReady: "health",
  ModelReady: "health",
  ServerMetadata: "metadata",
  ModelMetadata: "metadata",
  ModelInfer: "inference",
  ModelStreamInfer: "inference",
  ModelConfig: "model-config",
  ModelStatistics: "statistics",
  RepositoryIndex: "model-repository",
  RepositoryModelLoad: "model-repository",
  RepositoryModelUnload: "model-repository",
  SystemSharedMemoryStatus: "shared-memory",
  SystemSharedMemoryRegister: "shared-memory",
  SystemSharedMemoryUnregister: "shared-memory",
  CudaSharedMemoryStatus: "shared-memory",
  CudaSharedMemoryRegister: "shared-memory",
  CudaSharedMemoryUnregister: "shared-memory",
  TraceSetting: "trace",
  LogSettings: "logging",
});

/**
 * Decides whether call metadata grants an endpoint group.
 *
 * @param security The token and the restricted endpoint groups.
 * @param group The group of the RPC.
 * @param metadata The call's metadata.
 * @returns The refusal status, or `undefined` to let the call through.
 *
 * @example
 * ```ts
 * import { grpcAccessRefusal } from "./access.ts";
 * import { resolveSecurityConfig } from "../../config/security_config.ts";
 * import grpc from "@grpc/grpc-js";
 * import assert from "node:assert/strict";
 *
 * const security = resolveSecurityConfig({ accessToken: "secret" });
 * const metadata = new grpc.Metadata();
 * assert.equal(grpcAccessRefusal(security, "statistics", metadata)?.code, grpc.status.UNAUTHENTICATED);
 * metadata.set("triton-grpc-protocol-triton-access-token", "secret");
 * assert.equal(grpcAccessRefusal(security, "statistics", metadata), undefined);
 * ```
 */
export function grpcAccessRefusal(
  security: ResolvedSecurityConfig,
  group: EndpointGroup,
  metadata: grpc.Metadata,
): Partial<grpc.StatusObject> | undefined {
  const { accessToken, restrictedEndpoints } = security;
  if (accessToken === undefined || !restrictedEndpoints.has(group)) return undefined;
  const given = metadata.get(GRPC_ACCESS_TOKEN_KEY)[0];
  if (given === undefined) {
    return {
      code: grpc.status.UNAUTHENTICATED,
      details: `This protocol is restricted, expecting header '${GRPC_ACCESS_TOKEN_KEY}'`,
    };
  }
  if (typeof given !== "string" || !tokensEqual(given, accessToken)) {
    return {
      code: grpc.status.PERMISSION_DENIED,
      details:
        `This protocol is restricted: the '${GRPC_ACCESS_TOKEN_KEY}' header does not hold the access token`,
    };
  }
  return undefined;
}

/**
 * Wraps every handler of a service with the access check of its endpoint group.
 *
 * @param service The service.
 * @param security The token and the restricted endpoint groups.
 * @returns The service with checked handlers (the same service when nothing is restricted).
 *
 * @example Nothing restricted
 * ```ts
 * import { withAccessCheck } from "./access.ts";
 * import { resolveSecurityConfig } from "../../config/security_config.ts";
 * import assert from "node:assert/strict";
 *
 * const service = { definition: {}, implementation: {} };
 * assert.equal(withAccessCheck(service, resolveSecurityConfig({ restrictedEndpoints: [] })), service);
 * ```
 */
export function withAccessCheck(
  service: GrpcService,
  security: ResolvedSecurityConfig,
): GrpcService {
  if (security.accessToken === undefined || security.restrictedEndpoints.size === 0) {
    return service;
  }
  const implementation: grpc.UntypedServiceImplementation = {};
  for (const [name, handler] of Object.entries(service.implementation)) {
    const group = RPC_GROUPS[name];
    const definition = service.definition[name];
    if (group === undefined || definition === undefined) {
      implementation[name] = handler;
      continue;
    }
    if (definition.requestStream || definition.responseStream) {
      const stream = handler as (call: grpc.ServerDuplexStream<unknown, unknown>) => void;
      implementation[name] = (call: grpc.ServerDuplexStream<unknown, unknown>): void => {
        const refusal = grpcAccessRefusal(security, group, call.metadata);
        if (refusal === undefined) return stream(call);
        // grpc-js ends a server stream with the status of an emitted error.
        call.emit("error", refusal);
      };
    } else {
      const unary = handler as grpc.handleUnaryCall<unknown, unknown>;
      implementation[name] = (
        call: grpc.ServerUnaryCall<unknown, unknown>,
        callback: grpc.sendUnaryData<unknown>,
      ): void => {
        const refusal = grpcAccessRefusal(security, group, call.metadata);
        if (refusal === undefined) return unary(call, callback);
        callback(refusal);
      };
    }
  }
  return { definition: service.definition, implementation };
}
