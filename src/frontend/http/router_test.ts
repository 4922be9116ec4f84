import assert from "node:assert/strict";
import type { Engine } from "../../engine/engine.ts";
import { Logger } from "../../log.ts";
import { ENDPOINT_GROUPS, Router } from "./router.ts";
import { buildRoutes } from "./routes.ts";

const router = buildRoutes({} as Engine, {
  maxRequestBytes: 1024,
  headerForwardPattern: undefined,
  logger: new Logger(),
});

Deno.test("buildRoutes() maps every KServe v2 path to its endpoint group", () => {
  const cases: [string, string, string, Record<string, string>][] = [
    ["GET", "/v2/health/live", "health", {}],
    ["GET", "/v1/models", "openai", {}],
    ["GET", "/v1/models/SmolLM2", "openai", { model: "SmolLM2" }],
    ["POST", "/v1/chat/completions", "openai", {}],
    ["POST", "/v1/completions", "openai", {}],
    ["POST", "/v1/embeddings", "openai", {}],
    ["GET", "/v2/health/ready", "health", {}],
    ["GET", "/v2", "metadata", {}],
    ["GET", "/v2/models/m", "metadata", { model: "m" }],
    ["GET", "/v2/models/m/versions/12", "metadata", { model: "m", version: "12" }],
    ["GET", "/v2/models/m/ready", "health", { model: "m" }],
    ["GET", "/v2/models/m/versions/1/ready", "health", { model: "m", version: "1" }],
    ["GET", "/v2/models/m/config", "model-config", { model: "m" }],
    ["POST", "/v2/models/m/infer", "inference", { model: "m" }],
    ["POST", "/v2/models/a%2Fb/versions/3/infer", "inference", { model: "a/b", version: "3" }],
    ["GET", "/v2/models/stats", "statistics", {}],
    ["GET", "/v2/models/m/versions/2/stats", "statistics", { model: "m", version: "2" }],
    ["POST", "/v2/repository/index", "model-repository", {}],
    ["POST", "/v2/repository/r/index", "model-repository", { repo: "r" }],
    ["POST", "/v2/repository/models/m/load", "model-repository", { model: "m" }],
    ["POST", "/v2/repository/models/m/unload", "model-repository", { model: "m" }],
    ["POST", "/v2/repository/r/models/m/load", "model-repository", { repo: "r", model: "m" }],
    ["GET", "/v2/systemsharedmemory/status", "shared-memory", {}],
    ["POST", "/v2/cudasharedmemory/region/r/register", "shared-memory", { region: "r" }],
    ["GET", "/v2/trace/setting", "trace", {}],
    ["POST", "/v2/models/m/trace/setting", "trace", { model: "m" }],
    ["GET", "/v2/logging", "logging", {}],
  ];
  for (const [method, path, group, params] of cases) {
    const found = router.match(method, path);
    assert.equal(found.kind, "found", `${method} ${path}`);
    if (found.kind !== "found") continue;
    assert.equal(found.route.group, group, path);
    assert.deepEqual(found.params, params, path);
  }
  for (const route of router.routes) assert.ok(ENDPOINT_GROUPS.includes(route.group!));
});

Deno.test("buildRoutes() gives not-found and method-not-allowed", () => {
  for (
    const path of [
      "/",
      "/v2/",
      "/v2/models/m/versions/x",
      "/v2/models/m/versions/-1/infer",
      "/v2/models/m/infer/x",
      "/v3",
    ]
  ) {
    assert.equal(router.match("GET", path).kind, "not-found", path);
  }
  assert.deepEqual(router.match("GET", "/v2/models/m/infer"), {
    kind: "method-not-allowed",
    allowed: ["POST"],
  });
  assert.deepEqual(router.match("DELETE", "/v2/health/live"), {
    kind: "method-not-allowed",
    allowed: ["GET"],
  });
  assert.deepEqual(router.match("GET", "/v2/logging").kind, "found");
  assert.equal(router.match("HEAD", "/v2/health/ready").kind, "found");
  assert.equal(router.match("GET", "/v2/models/%E0%A4%A/ready").kind, "not-found");
});

Deno.test("Router.match() answers a repeated path the same and sees routes added later", () => {
  const local = new Router<string>().add("GET", /^\/a$/, { group: "health", handler: "first" });
  const once = local.match("GET", "/b");
  assert.equal(once.kind, "not-found");
  local.add("GET", /^\/b$/, { group: "health", handler: "second" });
  const found = local.match("GET", "/b");
  assert.equal(found.kind === "found" && found.route.handler, "second");
  assert.equal(local.match("GET", "/b"), found);
  assert.equal(local.match("POST", "/b").kind, "method-not-allowed");
  // The cache is bounded: many distinct paths still answer right.
  for (let i = 0; i < 2000; i++) assert.equal(local.match("GET", `/x${i}`).kind, "not-found");
  assert.equal(local.match("HEAD", "/a").kind, "found");
});

Deno.test("buildRoutes(): a /v1/ path no OpenAI route serves reaches the openai fallback", () => {
  for (
    const [method, path] of [
      ["GET", "/v1/chat/completions"],
      ["DELETE", "/v1/models"],
      ["POST", "/v1/images/generations"],
      ["GET", "/v1/models/%E0%A4%A"],
    ]
  ) {
    const found = router.match(method!, path!);
    assert.equal(found.kind, "fallback", `${method} ${path}`);
    if (found.kind === "fallback") assert.equal(found.fallback.group, "openai");
  }
  // The fallback is no route: the table holds only what the OpenAPI document describes.
  assert.ok(router.routes.every((route) => route.template !== undefined));
  assert.equal(router.match("GET", "/v2/nothing").kind, "not-found");
});
