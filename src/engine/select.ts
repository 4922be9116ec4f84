/**
 * Picking an engine: the Triton core when it is installed (see `setupCommand()`), else the
 * built-in TypeScript engine. `DENOTRITON_ENGINE` (`auto`, `triton`, `builtin`) overrides the
 * `auto` choice.
 *
 * @module
 */

import { TritonError, TritonValidationError } from "../errors.ts";
import { BuiltinEngine } from "./builtin/engine.ts";
import type { Engine } from "./engine.ts";
import { defaultTritonHome, findTritonInstall, setupCommand } from "../setup/install.ts";
import type { NativeEngineOptions } from "./native/server_options.ts";
import { readEnv } from "../permissions.ts";

/** Which engine to create: `auto` uses the Triton core when installed. */
export type EngineChoice = "auto" | "triton" | "builtin";

/** Options of {@linkcode createEngine}: the options both engines take, plus the core's own. */
export interface EngineOptions extends Omit<NativeEngineOptions, "install" | "logInfo"> {
  /**
   * Where the core is installed.
   *
   * @default {defaultTritonHome()}
   */
  tritonHome?: string;
}

const CHOICES: readonly EngineChoice[] = ["auto", "triton", "builtin"];

function envChoice(): EngineChoice | undefined {
  const value = readEnv("DENOTRITON_ENGINE"); // not granted: the argument decides
  if (value === undefined || value === "") return undefined;
  if (!CHOICES.includes(value as EngineChoice)) {
    throw new TritonValidationError(
      `Invalid DENOTRITON_ENGINE: expected one of ${CHOICES.join(", ")}, got '${value}'`,
    );
  }
  return value as EngineChoice;
}

/**
 * Creates (but does not start) an engine. `auto` picks the Triton core when it is installed
 * and logs which engine it chose and why.
 *
 * @param choice `auto`, `triton` or `builtin`; with `auto`, `DENOTRITON_ENGINE` decides first.
 * @param options Engine options.
 * @returns The engine; call `start()` next.
 * @throws {TritonError} When `triton` is asked for and the core is not installed.
 *
 * @example The built-in engine
 * ```ts
 * import { createEngine } from "./select.ts";
 * import assert from "node:assert/strict";
 *
 * const engine = await createEngine("builtin", {});
 * assert.equal(engine.kind, "builtin");
 * await engine.stop();
 * ```
 */
export async function createEngine(
  choice: EngineChoice = "auto",
  options: EngineOptions = {},
): Promise<Engine> {
  if (!CHOICES.includes(choice)) {
    throw new TritonValidationError(
      `Invalid engine choice: expected one of ${CHOICES.join(", ")}, got '${choice}'`,
    );
  }
  const effective = choice === "auto" ? envChoice() ?? "auto" : choice;
  const log = options.logger;
  if (effective === "builtin") {
    log?.info("Using the built-in engine (asked for)");
    return new BuiltinEngine(options);
  }
  if (effective === "auto" && Deno.permissions.querySync({ name: "ffi" }).state !== "granted") {
    log?.info("Using the built-in engine: the Triton engine would need --allow-ffi");
    return new BuiltinEngine(options);
  }
  let install;
  try {
    const home = options.tritonHome ?? defaultTritonHome();
    // Looking without the grant would prompt in a terminal; `auto` settles for the built-in one.
    if (
      effective === "auto" &&
      Deno.permissions.querySync({ name: "read", path: home }).state !== "granted"
    ) {
      log?.info(
        `Using the built-in engine: looking for the Triton core needs --allow-read=${home}`,
      );
      return new BuiltinEngine(options);
    }
    install = await findTritonInstall({ home });
  } catch (error) {
    if (effective === "triton") throw error;
    log?.info(`Using the built-in engine: cannot look for the Triton core (${String(error)})`);
    return new BuiltinEngine(options);
  }
  if (install === undefined) {
    if (effective === "triton") {
      throw new TritonError(
        `Cannot use the Triton engine: the Triton core is not installed (run: ${setupCommand()})`,
      );
    }
    log?.info(
      `Using the built-in engine: the Triton core is not installed (run ${setupCommand()} to use it)`,
    );
    return new BuiltinEngine(options);
  }
  const { NativeEngine } = await import("./native/engine.ts");
  log?.info(
    `Using the Triton engine: Triton ${install.version} found in ${install.home}${
      effective === "triton" ? " (asked for)" : ""
    }`,
  );
  return new NativeEngine({ ...options, install });
}
