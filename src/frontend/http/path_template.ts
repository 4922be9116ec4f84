/**
 * Route paths written once, as templates: `/v2/models/{model}[/versions/{version}]/infer`. The
 * router matches requests with the pattern a template compiles to, and the OpenAPI document lists
 * the paths it expands to, so the paths served and the paths described are the same text.
 *
 * A template holds `{name}` parameters, each matching the pattern {@linkcode PATH_PARAMETERS}
 * gives it, and at most one `[...]` optional part. It expands to one OpenAPI path without the
 * optional part and one with it.
 *
 * @module
 */

/** What a path parameter matches, and what the OpenAPI document says of it. */
export interface PathParameter {
  /** The regular expression of its segment, without anchors or groups. */
  readonly pattern: string;
  /** Its description in the OpenAPI document. */
  readonly description: string;
}

/** Every path parameter a template may hold; a name not listed matches one segment. */
export const PATH_PARAMETERS: Readonly<Record<string, PathParameter>> = {
  model: { pattern: "[^/]+", description: "The model's name." },
  version: {
    pattern: "[0-9]+",
    description: "The model's version; without it, the latest version the server has loaded.",
  },
  region: { pattern: "[^/]+", description: "The shared-memory region's name." },
  repo: {
    pattern: "[^/]+",
    description: "A repository name: Triton serves one repository and ignores or refuses it.",
  },
};

const DEFAULT_PARAMETER: PathParameter = { pattern: "[^/]+", description: "A path segment." };

/**
 * The parameter a template's `{name}` stands for.
 *
 * @param name The parameter's name.
 * @returns Its pattern and description.
 */
export function pathParameter(name: string): PathParameter {
  return PATH_PARAMETERS[name] ?? DEFAULT_PARAMETER;
}

const PARAMETER = /\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

function checkTemplate(template: string): { before: string; optional: string; after: string } {
  if (!template.startsWith("/")) {
    throw new Error(`Invalid path template '${template}': it must start with '/'`);
  }
  const open = template.indexOf("[");
  const close = template.indexOf("]");
  if (open === -1 && close === -1) return { before: template, optional: "", after: "" };
  if (
    open === -1 || close < open || template.indexOf("[", open + 1) !== -1 ||
    template.indexOf("]", close + 1) !== -1
  ) {
    throw new Error(`Invalid path template '${template}': at most one [optional] part`);
  }
  return {
    before: template.slice(0, open),
    optional: template.slice(open + 1, close),
    after: template.slice(close + 1),
  };
}

function escapeLiteral(text: string): string {
  return text.replace(/[.*+?^$()|\\]/g, "\\$&");
}

function compilePart(part: string): string {
  let out = "";
  let last = 0;
  for (const match of part.matchAll(PARAMETER)) {
    out += escapeLiteral(part.slice(last, match.index));
    const name = match[1]!;
    out += `(?<${name}>${pathParameter(name).pattern})`;
    last = match.index + match[0].length;
  }
  const rest = part.slice(last);
  if (/[{}]/.test(rest)) throw new Error(`Invalid path template part '${part}': stray brace`);
  return out + escapeLiteral(rest);
}

/**
 * Compiles a template into the anchored pattern the router matches, with one named group per
 * parameter.
 *
 * @param template The path template.
 * @returns The pattern.
 * @throws {Error} For a template that does not start with `/`, has more than one optional
 *   part, or a stray brace (a bug in the route table, found when it is built).
 *
 * @example Match with and without the optional version
 * ```ts
 * import { compilePathTemplate } from "./path_template.ts";
 * import assert from "node:assert/strict";
 *
 * const pattern = compilePathTemplate("/v2/models/{model}[/versions/{version}]/infer");
 * assert.deepEqual(
 *   { ...pattern.exec("/v2/models/a/versions/2/infer")?.groups },
 *   { model: "a", version: "2" },
 * );
 * assert.equal(pattern.exec("/v2/models/a/infer")?.groups?.model, "a");
 * assert.equal(pattern.test("/v2/models/a/versions/x/infer"), false);
 * ```
 */
export function compilePathTemplate(template: string): RegExp {
  const { before, optional, after } = checkTemplate(template);
  const middle = optional === "" ? "" : `(?:${compilePart(optional)})?`;
  return new RegExp(`^${compilePart(before)}${middle}${compilePart(after)}$`);
}

/**
 * The OpenAPI paths a template stands for: without its optional part, then with it.
 *
 * @param template The path template.
 * @returns One or two OpenAPI path templates.
 *
 * @example Expand an optional part; a plain path stays one
 * ```ts
 * import { expandPathTemplate } from "./path_template.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(expandPathTemplate("/v2/models/{model}[/versions/{version}]/ready"), [
 *   "/v2/models/{model}/ready",
 *   "/v2/models/{model}/versions/{version}/ready",
 * ]);
 * assert.deepEqual(expandPathTemplate("/v2/health/live"), ["/v2/health/live"]);
 * ```
 */
export function expandPathTemplate(template: string): string[] {
  const { before, optional, after } = checkTemplate(template);
  return optional === "" ? [template] : [before + after, before + optional + after];
}

/**
 * The names of a path's parameters, in order.
 *
 * @param path An OpenAPI path (or a template).
 * @returns The names.
 *
 * @example A model and a version parameter
 * ```ts
 * import { pathParameterNames } from "./path_template.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(pathParameterNames("/v2/models/{model}/versions/{version}"), ["model", "version"]);
 * ```
 */
export function pathParameterNames(path: string): string[] {
  return [...path.matchAll(PARAMETER)].map((match) => match[1]!);
}
