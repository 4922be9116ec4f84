/**
 * Deno permissions, for the server and the client alike: reading optional environment variables
 * without prompting, and reading which permission Deno refused from its `NotCapable` /
 * `PermissionDenied` error, so the caller can print one line naming the flag. No imports: the
 * client loads it without server code.
 *
 * @module
 */

/** A permission Deno refused, read from its error message. */
export interface DeniedPermission {
  /** The permission name: `env`, `read`, `write`, `net`, `ffi`, `sys`, `run`, `import`. */
  readonly name: string;
  /** What was asked for (a path, `host:port`, a variable), when Deno names it. */
  readonly resource: string | undefined;
  /** The narrowest flag granting it, e.g. `--allow-net=0.0.0.0:8000`. */
  readonly flag: string;
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
 * @example Find the temporary directory
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
 * The variables `@grpc/grpc-js` reads as a client (the client's gRPC transport; the server's gRPC
 * front end does not load grpc-js): those it reads when it loads, and the proxy settings it
 * reads for each channel (a refusal there is swallowed and the call never connects).
 */
export const GRPC_CLIENT_ENV_VARIABLES: readonly string[] = [
  "GRPC_NODE_VERBOSITY",
  "GRPC_VERBOSITY",
  "GRPC_NODE_TRACE",
  "GRPC_TRACE",
  "GRPC_SSL_CIPHER_SUITES",
  "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
  "GRPC_NODE_USE_ALTERNATIVE_RESOLVER",
  "GRPC_NODE_DEBUG_SEND_ERROR_DETAILS",
  "GRPC_EXPERIMENTAL_ENABLE_OUTLIER_DETECTION",
  "grpc_proxy",
  "https_proxy",
  "http_proxy",
  "no_grpc_proxy",
  "no_proxy",
];

/**
 * Tells, without prompting, whether `--allow-env` grants every one of `names`.
 *
 * @param names The variables.
 * @returns `true` when all are granted.
 *
 * @example An empty list is granted
 * ```ts
 * import { envGranted } from "./permissions.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(envGranted([]), true);
 * ```
 */
export function envGranted(names: readonly string[]): boolean {
  return names.every((variable) =>
    Deno.permissions.querySync({ name: "env", variable }).state === "granted"
  );
}
