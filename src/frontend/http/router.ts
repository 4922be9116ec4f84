/**
 * A tiny route table for the KServe v2 paths: each route has a method, an anchored path pattern
 * with named groups (written as a path template, which the OpenAPI document expands, or as a
 * pattern), the endpoint group it belongs to (the unit Triton's restricted-API settings and
 * access tokens work on), and its description for the OpenAPI document. A path prefix may have
 * a fallback, which answers what no route under it serves (an API with its own error body); it
 * is no route, so it has no description.
 *
 * @module
 */

import { type EndpointGroup, VALID_ENDPOINTS } from "../../config/security_config.ts";
import { compilePathTemplate } from "./path_template.ts";
import type { RouteDoc } from "./route_doc.ts";

export type { EndpointGroup };

/** Every endpoint group (Triton's restrictable groups, `--http-restricted-api`). */
export const ENDPOINT_GROUPS: readonly EndpointGroup[] = VALID_ENDPOINTS;

/** An HTTP method the routes use. */
export type Method = "GET" | "POST";

/** One route. */
export interface Route<H> {
  /** The method it answers. */
  readonly method: Method;
  /** An anchored pattern over the URL path; named groups become parameters. */
  readonly pattern: RegExp;
  /** The path template the pattern was compiled from (`path_template.ts`), if any. */
  readonly template: string | undefined;
  /**
   * The endpoint group, for access control; `undefined` for a route no access check applies to
   * (the docs page's static files).
   */
  readonly group: EndpointGroup | undefined;
  /** What runs it. */
  readonly handler: H;
  /** Its description in the OpenAPI document (a route with a template can carry one). */
  readonly doc: RouteDoc | undefined;
}

/** What {@linkcode Router.add} serves at a method and path. */
export interface RouteSpec<H> {
  /**
   * The endpoint group, for access control; `undefined` for a route no access check applies to.
   * Required, so that no route loses its access check by an omission.
   */
  readonly group: EndpointGroup | undefined;
  /** What runs it. */
  readonly handler: H;
  /** Its description for the OpenAPI document (only a template's path can be described). */
  readonly doc?: RouteDoc;
}

/** What answers the requests under a path prefix that no route serves. */
export interface Fallback<H> {
  /** The path prefix, e.g. `/v1/`. */
  readonly prefix: string;
  /** The endpoint group, for access control. */
  readonly group: EndpointGroup | undefined;
  /** What runs it. */
  readonly handler: H;
}

/** What a route handler receives. */
export interface RouteContext {
  /** The request. */
  readonly request: Request;
  /** Decoded path parameters (`model`, `version`, `repo`, `region`, ...). */
  readonly params: Readonly<Record<string, string>>;
  /** Aborted when the client disconnects before the response is ready. */
  readonly signal: AbortSignal;
}

/** A route handler of the HTTP front end (the router itself takes any handler type). */
export type RouteHandler = (context: RouteContext) => Promise<Response>;

/** How many (method, path) matches a router keeps. */
const MATCH_CACHE_SIZE = 512;

/** The outcome of {@linkcode Router.match}. */
export type RouteMatch<H> =
  | {
    readonly kind: "found";
    readonly route: Route<H>;
    readonly params: Readonly<Record<string, string>>;
  }
  | { readonly kind: "fallback"; readonly fallback: Fallback<H> }
  | { readonly kind: "method-not-allowed"; readonly allowed: readonly Method[] }
  | { readonly kind: "not-found" };

/**
 * Matches paths against routes, first match wins; a path that only matches under another method
 * gives `method-not-allowed`.
 *
 * @typeParam H The handler type.
 *
 * @example Found with a decoded parameter, wrong method, not found
 * ```ts
 * import { Router } from "./router.ts";
 * import assert from "node:assert/strict";
 *
 * const router = new Router<string>();
 * router.add("GET", /^\/v2\/models\/(?<model>[^/]+)$/, { group: "metadata", handler: "meta" });
 * const found = router.match("GET", "/v2/models/m%20x");
 * assert.equal(found.kind, "found");
 * if (found.kind === "found") assert.equal(found.params.model, "m x");
 * assert.equal(router.match("POST", "/v2/models/m").kind, "method-not-allowed");
 * assert.equal(router.match("GET", "/v3").kind, "not-found");
 * ```
 */
export class Router<H> {
  #routes: Route<H>[] = [];
  #fallbacks: Fallback<H>[] = [];
  #cache = new Map<string, RouteMatch<H>>();

  /** The routes, in match order. */
  get routes(): readonly Route<H>[] {
    return this.#routes;
  }

  /**
   * Adds a route.
   *
   * @param method The method.
   * @param path A path template (`/v2/models/{model}[/versions/{version}]`), or an anchored
   *   pattern (`^...$`) with named groups.
   * @param spec The endpoint group, the handler and the route's description.
   * @returns This router.
   * @throws {Error} For a description of a route given as a pattern, or a bad template.
   */
  add(method: Method, path: string | RegExp, spec: RouteSpec<H>): this {
    const { group, handler, doc } = spec;
    const template = typeof path === "string" ? path : undefined;
    if (doc !== undefined && template === undefined) {
      throw new Error(`Cannot describe the route ${method} ${path}: give its path as a template`);
    }
    const pattern = template === undefined ? path as RegExp : compilePathTemplate(template);
    this.#routes.push({ method, pattern, template, group, handler, doc });
    this.#cache.clear();
    return this;
  }

  /**
   * Adds the fallback of a path prefix: it answers a request under the prefix that no route
   * serves (no route's pattern matches, or only under another method), in place of the
   * router's not-found and method-not-allowed.
   *
   * @param prefix The path prefix, e.g. `/v1/`.
   * @param group The endpoint group; `undefined` for no access check.
   * @param handler The handler.
   * @returns This router.
   *
   * @example A prefix's fallback answers what its routes do not
   * ```ts
   * import { Router } from "./router.ts";
   * import assert from "node:assert/strict";
   *
   * const router = new Router<string>()
   *   .add("GET", "/v1/models", { group: "openai", handler: "models" })
   *   .fallback("/v1/", "openai", "no such route");
   * assert.equal(router.match("GET", "/v1/models").kind, "found");
   * const other = router.match("DELETE", "/v1/models");
   * assert.equal(other.kind === "fallback" && other.fallback.handler, "no such route");
   * assert.equal(router.match("GET", "/v2/models").kind, "not-found");
   * assert.equal(router.routes.length, 1);
   * ```
   */
  fallback(prefix: string, group: EndpointGroup | undefined, handler: H): this {
    this.#fallbacks.push({ prefix, group, handler });
    this.#cache.clear();
    return this;
  }

  /**
   * The methods the routes serve at a path (what a CORS preflight may ask for).
   *
   * @param path The URL path, still percent-encoded.
   * @returns The methods, in route order; empty when no route matches the path.
   */
  methodsAt(path: string): Method[] {
    const methods: Method[] = [];
    for (const route of this.#routes) {
      if (route.pattern.test(path) && !methods.includes(route.method)) methods.push(route.method);
    }
    return methods;
  }

  /**
   * Finds the route of a request.
   *
   * @param method The request method (`HEAD` matches `GET` routes).
   * @param path The URL path, still percent-encoded.
   * @returns The route and its decoded parameters, or why there is none.
   */
  match(method: string, path: string): RouteMatch<H> {
    const wanted = method === "HEAD" ? "GET" : method;
    // Clients repeat a handful of paths (one infer path per model): a match is kept, so a
    // request skips the walk over every pattern. Paths come from clients, so the cache is bounded.
    const key = `${wanted} ${path}`;
    const cached = this.#cache.get(key);
    if (cached !== undefined) return cached;
    const matched = this.#walk(wanted, path);
    if (this.#cache.size >= MATCH_CACHE_SIZE) this.#cache.clear();
    this.#cache.set(key, matched);
    return matched;
  }

  #walk(wanted: string, path: string): RouteMatch<H> {
    const allowed: Method[] = [];
    for (const route of this.#routes) {
      const found = route.pattern.exec(path);
      if (found === null) continue;
      if (route.method !== wanted) {
        if (!allowed.includes(route.method)) allowed.push(route.method);
        continue;
      }
      const params: Record<string, string> = {};
      let valid = true;
      for (const [key, value] of Object.entries(found.groups ?? {})) {
        if (value === undefined) continue;
        try {
          params[key] = decodeURIComponent(value);
        } catch {
          valid = false;
        }
      }
      if (!valid) continue;
      return { kind: "found", route, params: Object.freeze(params) };
    }
    const fallback = this.#fallbacks.find((entry) => path.startsWith(entry.prefix));
    if (fallback !== undefined) return { kind: "fallback", fallback };
    return allowed.length > 0 ? { kind: "method-not-allowed", allowed } : { kind: "not-found" };
  }
}
