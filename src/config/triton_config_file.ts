/**
 * Reads a `TritonConfig` YAML file into a plain object of camelCase fields. Values are not
 * validated here; the caller's schema does that and names the file in its messages.
 *
 * @module
 */

import { parse, YAMLParseError } from "yaml";
import { describeError, TritonPermissionError, TritonValidationError } from "../errors.ts";
import { deniedPermission } from "../permissions.ts";

const SNAKE_CASE = /^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$/;

/**
 * Reads and parses a YAML file holding a mapping of `TritonConfig` fields. Keys may be camelCase
 * (`httpPort`) or snake_case (`http_port`); a `null` value leaves the field unset.
 *
 * @param path The file's path.
 * @returns The fields by camelCase name (`{}` for an empty file).
 * @throws {TritonValidationError} The file cannot be read, is not valid YAML, is not a mapping,
 * or gives a field twice.
 * @throws {TritonPermissionError} Without `--allow-read` of the file, or the `--allow-env` the YAML
 * parser needs.
 *
 * @example Read snake_case and camelCase keys
 * ```ts
 * import { readTritonConfigFile } from "./triton_config_file.ts";
 * import assert from "node:assert/strict";
 *
 * const path = await Deno.makeTempFile({ suffix: ".yaml" });
 * try {
 *   await Deno.writeTextFile(path, "http_port: 9000\nallowGrpc: false\nlogFile: null\n");
 *   assert.deepEqual(readTritonConfigFile(path), { httpPort: 9000, allowGrpc: false });
 * } finally {
 *   await Deno.remove(path);
 * }
 * ```
 */
export function readTritonConfigFile(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = Deno.readTextFileSync(path);
  } catch (error) {
    if (deniedPermission(error) !== undefined) {
      throw new TritonPermissionError(
        `DenoTriton needs --allow-read=${path} for the TritonConfig file`,
      );
    }
    const reason = describeError(error);
    throw new TritonValidationError(`Cannot read TritonConfig file ${path}: ${reason}`, {
      cause: error,
    });
  }
  let document: unknown;
  try {
    document = parse(text, { schema: "core" });
  } catch (error) {
    if (deniedPermission(error) !== undefined) {
      // The yaml package looks up LOG_TOKENS/LOG_STREAM while it parses.
      throw new TritonPermissionError(
        `DenoTriton needs --allow-env=LOG_TOKENS,LOG_STREAM for the TritonConfig file (the YAML parser reads them)`,
      );
    }
    if (!(error instanceof YAMLParseError)) throw error;
    const where = error.linePos?.[0]
      ? ` (line ${error.linePos[0].line}, column ${error.linePos[0].col})`
      : "";
    throw new TritonValidationError(
      `Invalid TritonConfig from ${path}: cannot parse YAML: ${
        error.message.split(" at line ")[0]
      }${where}`,
      { cause: error },
    );
  }
  if (document === undefined || document === null) return {};
  if (typeof document !== "object" || Array.isArray(document)) {
    const kind = Array.isArray(document) ? "a list" : JSON.stringify(document);
    throw new TritonValidationError(
      `Invalid TritonConfig from ${path}: the file must hold a mapping of TritonConfig fields, got ${kind}`,
    );
  }
  const fields = new Map<string, [string, unknown]>();
  for (const [key, value] of Object.entries(document)) {
    const field = SNAKE_CASE.test(key)
      ? key.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase())
      : key;
    const previous = fields.get(field);
    if (previous !== undefined) {
      throw new TritonValidationError(
        `Invalid TritonConfig from ${path}: field "${field}" is given twice (as "${
          previous[0]
        }" and "${key}")`,
      );
    }
    fields.set(field, [key, value]);
  }
  // fromEntries defines own properties, so a "__proto__" key stays a plain (unknown) field.
  return Object.fromEntries(
    [...fields].filter(([, [, value]]) => value !== null).map(([field, [, value]]) => [
      field,
      value,
    ]),
  );
}
