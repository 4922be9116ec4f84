/**
 * The Python environment the benchmark needs for PyTriton (and, on a plain system, for
 * perf_analyzer): an existing interpreter named by the caller, or a venv it creates and fills
 * with pip. Failures come back as a reason, never as an exception, so the benchmark can skip
 * PyTriton with one clear line.
 *
 * @module
 */

/** Options of {@linkcode ensureVenv}. */
export interface VenvOptions {
  /** The venv folder; created when it has no interpreter yet. */
  readonly dir: string;
  /** What `pip install` installs when the probe fails. */
  readonly packages: readonly string[];
  /** Python code that exits 0 when the environment has what is needed. */
  readonly probe: string;
  /**
   * The interpreter that creates the venv.
   *
   * @default {"python3"}
   */
  readonly python?: string;
  /**
   * Called with a line before slow steps (creating, installing).
   *
   * @default {console.log}
   */
  readonly log?: (line: string) => void;
}

/** A ready interpreter, or why there is none. */
export type VenvResult = { readonly python: string } | { readonly missing: string };

const decoder = new TextDecoder();

/**
 * Runs a command to its end. A command that cannot start (not installed, no permission) is a
 * failed run whose text says so, not an exception.
 *
 * @param command The program.
 * @param args Its arguments.
 * @param env Variables added to the environment.
 * @returns Whether it exited 0, and its stdout and stderr.
 *
 * @example A missing program
 * ```ts
 * import { runCommand } from "./venv.ts";
 * import assert from "node:assert/strict";
 *
 * const result = await runCommand("/nonexistent/python3", ["-V"]);
 * assert.equal(result.ok, false);
 * assert.match(result.text, /Cannot run \/nonexistent\/python3/);
 * ```
 */
export async function runCommand(
  command: string,
  args: readonly string[],
  env: Readonly<Record<string, string>> = {},
): Promise<{ ok: boolean; text: string }> {
  try {
    const result = await new Deno.Command(command, {
      args: [...args],
      env: { ...env },
      stdout: "piped",
      stderr: "piped",
    }).output();
    return {
      ok: result.success,
      text: (decoder.decode(result.stdout) + decoder.decode(result.stderr)).trim(),
    };
  } catch (error) {
    return {
      ok: false,
      text: `Cannot run ${command}: ${error instanceof Error ? error.message : String(error)}`,
    };
  }
}

/**
 * Whether a path exists.
 *
 * @param path The path.
 * @returns `false` also when it cannot be looked at.
 */
export async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * Makes sure a venv passes `probe`: creates it (`python3 -m venv`) when it has no interpreter,
 * and `pip install`s the packages when the probe fails.
 *
 * @param options The folder, packages, probe and creating interpreter.
 * @returns The venv's interpreter, or the reason it cannot be had.
 *
 * @example An interpreter that does not exist
 * ```ts
 * import { ensureVenv } from "./venv.ts";
 * import assert from "node:assert/strict";
 *
 * const dir = await Deno.makeTempDir();
 * const result = await ensureVenv({
 *   dir: `${dir}/venv`, packages: [], probe: "import sys", python: "/nonexistent/python3",
 *   log: () => {},
 * });
 * assert.ok("missing" in result);
 * assert.match(result.missing, /^Cannot create the venv .*: Cannot run \/nonexistent\/python3/);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function ensureVenv(options: VenvOptions): Promise<VenvResult> {
  const { dir, packages, probe, python: creator = "python3", log = console.log } = options;
  const python = `${dir}/bin/python`;
  if (await exists(python)) {
    if ((await runCommand(python, ["-c", probe])).ok) return { python };
  } else {
    log(`bench: creating the venv ${dir} ...`);
    // Without packages there is nothing for pip to do, so the venv does without it.
    const made = await runCommand(creator, [
      "-m",
      "venv",
      ...(packages.length === 0 ? ["--without-pip"] : []),
      dir,
    ]);
    if (!made.ok) return { missing: `Cannot create the venv ${dir}: ${made.text}` };
  }
  if (packages.length > 0) {
    log(`bench: installing ${packages.join(" ")} into ${dir} ...`);
    const installed = await runCommand(python, [
      "-m",
      "pip",
      "install",
      "--quiet",
      "--disable-pip-version-check",
      ...packages,
    ]);
    if (!installed.ok) {
      return { missing: `Cannot install ${packages.join(" ")} into ${dir}: ${installed.text}` };
    }
  }
  const checked = await runCommand(python, ["-c", probe]);
  if (!checked.ok) {
    return { missing: `The venv ${dir} fails its check (${probe}): ${checked.text}` };
  }
  return { python };
}
