import assert from "node:assert/strict";
import { pathOf } from "./url_path.ts";

Deno.test("pathOf() gives what URL.pathname gives", () => {
  const urls = [
    "http://localhost:8000/v2/models/add_sub/infer",
    "http://127.0.0.1:1/v2/models/add_sub/versions/2/infer?x=1#y",
    "http://h/",
    "http://h",
    "http://h?q=/a",
    "http://h#/a",
    "http://h/a?b#c",
    "http://h/a#b?c",
    "https://h:443/v2//models/",
    "http://h/v2/models/a.b/infer",
    "http://h/v2/models/../health/live",
    "http://h/v2/./models",
    "http://h/v2/models/a%2Fb/infer",
    "http://h/v2/models/%61/ready",
    "http://h/v2\\models",
    "http://h/v2/mödel",
    "http://h/a b",
    "http://h/a~b",
    "http://user:pw@h/a",
    "http://[::1]:8000/v2/health/ready",
  ];
  for (const url of urls) assert.equal(pathOf(url), new URL(url).pathname, url);
});

Deno.test("pathOf() refuses what URL refuses", () => {
  assert.throws(() => pathOf("not a url"), TypeError);
});
