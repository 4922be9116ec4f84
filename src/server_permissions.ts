/**
 * What each part of the server needs each Deno permission for, and turning a refused permission
 * into one {@linkcode TritonPermissionError} line: `DenoTriton needs <flag> for <why>`. The
 * README's "Permissions" table documents the same.
 *
 * @module
 */

import { TritonPermissionError } from "./errors.ts";
import { type DeniedPermission, deniedPermission, tempDirectory } from "./permissions.ts";

/** The flag to suggest for a denied permission and what DenoTriton needs it for. */
export interface PermissionUse {
  /** The flag, e.g. `--allow-write=/tmp`. */
  readonly grant: string;
  /** What for, e.g. `the Triton core's temporary model repository`. */
  readonly why: string;
}

/**
 * Runs `step`; a permission error from it (or in its `cause` chain) becomes one
 * {@linkcode TritonPermissionError} line: `DenoTriton needs <flag> for <why>`.
 *
 * @typeParam T What `step` returns.
 * @param step The work.
 * @param use The flag and reason to print for a refused permission.
 * @returns What `step` returns.
 * @throws {TritonPermissionError} When Deno refused a permission.
 *
 * @example A refused listen
 * ```ts
 * import { explainPermission } from "./server_permissions.ts";
 * import assert from "node:assert/strict";
 *
 * await assert.rejects(
 *   explainPermission(
 *     () => {
 *       throw new Deno.errors.NotCapable(
 *         'Requires net access to "0.0.0.0:8000", run again with the --allow-net flag',
 *       );
 *     },
 *     (denied) => ({ grant: denied.flag, why: "the HTTP front end" }),
 *   ),
 *   { message: "DenoTriton needs --allow-net=0.0.0.0:8000 for the HTTP front end" },
 * );
 * ```
 */
export async function explainPermission<T>(
  step: () => T | Promise<T>,
  use: (denied: DeniedPermission) => PermissionUse,
): Promise<T> {
  try {
    return await step();
  } catch (error) {
    if (error instanceof TritonPermissionError) throw error;
    const denied = deniedPermission(error);
    if (denied === undefined) throw error;
    const { grant, why } = use(denied);
    throw new TritonPermissionError(`DenoTriton needs ${grant} for ${why}`);
  }
}

/** What the front ends and engines use each permission for, by server part. */
export type ServerPart = "builtin" | "triton" | "http" | "grpc" | "metrics";

const PART_NAMES: Record<ServerPart, string> = {
  builtin: "the built-in engine",
  triton: "the Triton engine",
  http: "the HTTP front end",
  grpc: "the gRPC front end",
  metrics: "the metrics front end",
};

/**
 * The flag to suggest, and why, when Deno refuses a permission to a part of the server. This is
 * the table the README's "Permissions" section documents.
 *
 * @param part The part that was starting.
 * @param denied What Deno refused.
 * @param tritonHome Where the Triton core is installed (for the Triton engine's read grant).
 * @returns The flag and the reason.
 *
 * @example The Triton engine's model repository
 * ```ts
 * import { permissionUse } from "./server_permissions.ts";
 * import { tempDirectory } from "./permissions.ts";
 * import assert from "node:assert/strict";
 *
 * const denied = { name: "write", resource: tempDirectory(), flag: "" };
 * assert.deepEqual(permissionUse("triton", denied), {
 *   grant: `--allow-write=${tempDirectory()}`,
 *   why: "the Triton core's temporary model repository",
 * });
 * ```
 */
export function permissionUse(
  part: ServerPart,
  denied: DeniedPermission,
  tritonHome?: string,
): PermissionUse {
  const { name, resource } = denied;
  if (name === "read" && resource?.startsWith("/proc/")) {
    return { grant: "--allow-read=/proc/stat,/proc/meminfo", why: "CPU metrics (allowCpuMetrics)" };
  }
  if (name === "net" && resource?.endsWith(":0")) {
    // An ephemeral port: only the host can be granted ahead.
    return { grant: `--allow-net=${resource.slice(0, -2)}`, why: PART_NAMES[part] };
  }
  if (part === "triton") {
    switch (name) {
      case "write":
        return {
          grant: `--allow-write=${tempDirectory()}`,
          why: "the Triton core's temporary model repository",
        };
      case "read":
        return {
          grant: `--allow-read=${tritonHome ?? resource ?? ""}`.replace(/=$/, ""),
          why: "the Triton core's files",
        };
      case "ffi":
        // Not `--allow-ffi=<home>`: Deno.UnsafePointer needs the unrestricted grant.
        return { grant: "--allow-ffi", why: "the Triton core" };
    }
  }
  return { grant: denied.flag, why: PART_NAMES[part] };
}
