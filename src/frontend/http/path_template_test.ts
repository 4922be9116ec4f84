import assert from "node:assert/strict";
import { compilePathTemplate, expandPathTemplate } from "./path_template.ts";

Deno.test("compilePathTemplate() escapes literals and refuses templates it cannot expand", () => {
  // A dot is a literal, not "any character".
  const pattern = compilePathTemplate("/v2/openapi.json");
  assert.equal(pattern.test("/v2/openapi.json"), true);
  assert.equal(pattern.test("/v2/openapiXjson"), false);
  // A name without a pattern of its own matches one segment.
  assert.deepEqual(
    { ...compilePathTemplate("/a/{thing}/b").exec("/a/x%2Fy/b")?.groups },
    { thing: "x%2Fy" },
  );
  assert.equal(compilePathTemplate("/a/{thing}/b").test("/a/x/y/b"), false);
  for (
    const [template, message] of [
      ["v2/health", "it must start with '/'"],
      ["/a[/b][/c]", "at most one [optional] part"],
      ["/a]/b[", "at most one [optional] part"],
      ["/a/{b", "stray brace"],
    ]
  ) {
    assert.throws(
      () => compilePathTemplate(template!),
      new RegExp(message!.replace(/[[\]]/g, "\\$&")),
    );
  }
  assert.deepEqual(expandPathTemplate("/a[/b/{c}]/d"), ["/a/d", "/a/b/{c}/d"]);
});
