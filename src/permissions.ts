/**
 * Deno permissions: reading optional environment variables without prompting, and turning Deno's
 * `NotCapable` / `PermissionDenied` errors into one {@linkcode TritonPermissionError} line that
 * names the flag to add and why.
 *
 * @module
 */

import { TritonPermissionError } from "./errors.ts";

/** A permission Deno refused, read from its error message. */
export interface DeniedPermission {
  /** The permission name: `env`, `read`, `write`, `net`, `ffi`, `sys`, `run`, `import`. */
  readonly name: string;
  /** What was asked for (a path, `host:port`, a variable), when Deno names it. */
  readonly resource: string | undefined;
  /** The narrowest flag granting it, e.g. `--allow-net=0.0.0.0:8000`. */
  readonly flag: string;
}

/** The flag to suggest for a denied permission and what DenoTriton needs it for. */
export interface PermissionUse {
  /** The flag, e.g. `--allow-write=/tmp`. */
  readonly grant: string;
  /** What for, e.g. `the Triton core's temporary model repository`. */
  readonly why: string;
}

// Deno: `Requires write access to "/x", run again with the --allow-write flag`; the temporary
// directory shows as `<TMP>`, an unnamed env read has no resource.
const DENO_MESSAGE = /^Requires (\w+) access(?: to (.+?))?, (?:run again|specify)/;

/**
 * Reads an environment variable when `--allow-env` grants it, without prompting.
 *
 * @param name The variable.
 * @returns Its value; `undefined` when unset or not granted.
 *
 * @example An unset variable
 * ```ts
 * import { readEnv } from "./permissions.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(readEnv("DENOTRITON_SURELY_UNSET"), undefined);
 * ```
 */
export function readEnv(name: string): string | undefined {
  try {
    if (Deno.permissions.querySync({ name: "env", variable: name }).state !== "granted") {
      return undefined;
    }
    return Deno.env.get(name);
  } catch {
    return undefined;
  }
}

/**
 * The directory `Deno.makeTempDir` writes to: `$TMPDIR` when readable, else `/tmp`.
 *
 * @returns A path.
 *
 * @example
 * ```ts
 * import { tempDirectory } from "./permissions.ts";
 * import assert from "node:assert/strict";
 *
 * assert.ok(tempDirectory().length > 0);
 * ```
 */
export function tempDirectory(): string {
  return readEnv("TMPDIR") ||
    (Deno.build.os === "windows" ? readEnv("TEMP") ?? "C:\\Temp" : "/tmp");
}

/**
 * Finds the permission Deno refused in an error or its `cause` chain.
 *
 * @param error What was thrown.
 * @returns The permission, or `undefined` when the error is not about a permission.
 *
 * @example A refused listen
 * ```ts
 * import { deniedPermission } from "./permissions.ts";
 * import assert from "node:assert/strict";
 *
 * const refused = new Deno.errors.NotCapable(
 *   'Requires net access to "0.0.0.0:8000", run again with the --allow-net flag',
 * );
 * assert.deepEqual(deniedPermission(new Error("Cannot listen", { cause: refused })), {
 *   name: "net",
 *   resource: "0.0.0.0:8000",
 *   flag: "--allow-net=0.0.0.0:8000",
 * });
 * assert.equal(deniedPermission(new Error("Other")), undefined);
 * ```
 */
export function deniedPermission(error: unknown): DeniedPermission | undefined {
  let current = error;
  for (let depth = 0; depth < 8 && current instanceof Error; depth++) {
    if (
      current instanceof Deno.errors.NotCapable || current instanceof Deno.errors.PermissionDenied
    ) {
      const match = DENO_MESSAGE.exec(current.message);
      if (match === null) return undefined;
      const name = match[1]!;
      let resource = match[2]?.replace(/^"(.*)"$/, "$1");
      if (resource === "<TMP>") resource = tempDirectory();
      return { name, resource, flag: `--allow-${name}${resource ? `=${resource}` : ""}` };
    }
    current = current.cause;
  }
  return undefined;
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
 * import { explainPermission } from "./permissions.ts";
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

/**
 * The variables `@grpc/grpc-js` reads when it loads: the gRPC front end (and the client's gRPC
 * transport) needs `--allow-env` for these, and nothing else needs them.
 */
export const GRPC_ENV_VARIABLES: readonly string[] = [
  "GRPC_NODE_VERBOSITY",
  "GRPC_VERBOSITY",
  "GRPC_NODE_TRACE",
  "GRPC_TRACE",
  "GRPC_SSL_CIPHER_SUITES",
  "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
  "GRPC_NODE_USE_ALTERNATIVE_RESOLVER",
  "GRPC_NODE_DEBUG_SEND_ERROR_DETAILS",
  "GRPC_EXPERIMENTAL_ENABLE_OUTLIER_DETECTION",
];

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
 * import { permissionUse, tempDirectory } from "./permissions.ts";
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
  if (part === "grpc" && name === "env") {
    return {
      grant: `--allow-env=${GRPC_ENV_VARIABLES.join(",")}`,
      why: "the gRPC front end (grpc-js reads these variables when it loads)",
    };
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
