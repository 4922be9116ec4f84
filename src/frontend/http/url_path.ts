/**
 * The path of a request URL, as `new URL(url).pathname` gives it, without parsing the URL when
 * the path is plain: the KServe routes' paths are, and parsing a URL is a measurable share of a
 * small inference request (issue 38).
 *
 * @module
 */

// Paths whose `pathname` is their text as it is: no dot segments, percent escapes, backslashes
// or characters the URL parser would escape or drop.
const PLAIN_PATH = /^\/[A-Za-z0-9_\-\/]*$/;

/**
 * The path of an absolute URL (what `Deno.serve` gives as `request.url`).
 *
 * @param url An absolute URL.
 * @returns Its `pathname`: the text itself when it is plain, otherwise the URL parser's.
 * @throws {TypeError} When `url` is not a URL and its path is not plain.
 *
 * @example A plain path and one the parser normalizes
 * ```ts
 * import { pathOf } from "./url_path.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(pathOf("http://localhost:8000/v2/models/add_sub/infer?x=1"), "/v2/models/add_sub/infer");
 * assert.equal(pathOf("http://localhost:8000/v2/models/../health/ready"), "/v2/health/ready");
 * ```
 */
export function pathOf(url: string): string {
  const authority = url.indexOf("://");
  if (authority > 0) {
    const start = url.indexOf("/", authority + 3);
    const query = url.indexOf("?", authority + 3);
    const fragment = url.indexOf("#", authority + 3);
    // The authority ends at the first "/", "?" or "#": only a "/" starts the path.
    if (start > 0 && (query < 0 || query > start) && (fragment < 0 || fragment > start)) {
      let end = url.length;
      if (query > 0) end = query;
      if (fragment > 0 && fragment < end) end = fragment;
      const path = url.slice(start, end);
      if (PLAIN_PATH.test(path)) return path;
    }
  }
  return new URL(url).pathname;
}
