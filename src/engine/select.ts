/**
 * Engine selection: `"auto"` runs the Triton core when it is installed and falls back to the
 * built-in engine otherwise, saying which it chose and why.
 *
 * @module
 */

import type { ResolvedTritonConfig } from "../config/triton_config.ts";
import { TritonValidationError, type TritonUnrecoverableError } from "../errors.ts";
import type { Logger } from "../log.ts";
import { BuiltinEngine } from "./builtin/engine.ts";
import type { Engine } from "./engine.ts";

/** Which engine to run. */
export type EngineChoice = "auto" | "triton" | "builtin";

/** What an engine is created from. */
export interface EngineOptions {
  /** The resolved server configuration. */
  config: ResolvedTritonConfig;
  /** The server's logger. */
  logger: Logger;
  /** Called when a callable throws a `TritonUnrecoverableError`. */
  onUnrecoverable?: (error: TritonUnrecoverableError) => void;
}

const CHOICES: readonly EngineChoice[] = ["auto", "triton", "builtin"];

/**
 * Reads `DENOTRITON_ENGINE`, when permitted and set.
 *
 * @returns The engine named by the environment, or `undefined`.
 * @throws {TritonValidationError} When the variable names no engine.
 */
function engineFromEnv(): EngineChoice | undefined {
  let value: string | undefined;
  try {
    value = Deno.env.get("DENOTRITON_ENGINE");
  } catch {
    return undefined;
  }
  if (value === undefined || value === "") return undefined;
  if (!CHOICES.includes(value as EngineChoice)) {
    throw new TritonValidationError(
      `Invalid DENOTRITON_ENGINE ${JSON.stringify(value)}: expected one of ${CHOICES.join(", ")}`,
    );
  }
  return value as EngineChoice;
}

/**
 * Creates the engine for a choice. An explicit choice wins over `DENOTRITON_ENGINE`, which wins
 * over `"auto"`.
 *
 * @param choice The requested engine.
 * @param options Configuration, logger and the unrecoverable-error hook.
 * @returns An engine, not yet started.
 * @throws {TritonValidationError} When the Triton core is asked for but not installed.
 *
 * @example The built-in engine
 * ```ts
 * import { createEngine } from "./select.ts";
 * import { resolveTritonConfig } from "../config/triton_config.ts";
 * import { Logger } from "../log.ts";
 * import assert from "node:assert/strict";
 *
 * const engine = await createEngine("builtin", { config: resolveTritonConfig({ env: {} }), logger: new Logger() });
 * assert.equal(engine.kind, "builtin");
 * ```
 */
export function createEngine(choice: EngineChoice, options: EngineOptions): Promise<Engine> {
  const wanted = choice === "auto" ? engineFromEnv() ?? "auto" : choice;
  const { config, logger } = options;
  if (wanted === "triton") {
    return Promise.reject(
      new TritonValidationError(
        "Cannot use the Triton-core engine: it is not available in this build (use engine \"builtin\")",
      ),
    );
  }
  if (wanted === "auto") {
    logger.info("Engine: built-in TypeScript engine (the Triton core is not installed)");
  }
  const engineOptions: ConstructorParameters<typeof BuiltinEngine>[0] = {
    id: config.id,
    strictReadiness: config.strictReadiness,
    exitTimeoutSecs: config.exitTimeoutSecs,
    logger,
    responseCacheByteSize: config.responseCacheByteSize,
  };
  if (options.onUnrecoverable) engineOptions.onUnrecoverable = options.onUnrecoverable;
  return Promise.resolve(new BuiltinEngine(engineOptions));
}
