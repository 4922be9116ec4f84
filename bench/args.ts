/**
 * Command-line options of the benchmark scripts: `--name value` pairs (switches such as `--quick`
 * are read with `Deno.args.includes`).
 *
 * @module
 */

/**
 * The value after `--name`.
 *
 * @param name The option's name, without dashes.
 * @returns The value, or `undefined` when the option (or its value) is missing.
 */
export function option(name: string): string | undefined {
  const at = Deno.args.indexOf(`--${name}`);
  return at >= 0 ? Deno.args[at + 1] : undefined;
}

/**
 * The value after `--name`, or a default.
 *
 * @param name The option's name, without dashes.
 * @param fallback The value when the option is missing.
 * @returns The value.
 */
export function flag(name: string, fallback: string): string {
  return option(name) ?? fallback;
}
