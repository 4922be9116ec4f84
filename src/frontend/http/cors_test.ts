import assert from "node:assert/strict";
import type { Engine } from "../../engine/engine.ts";
import { resolveSecurityConfig } from "../../config/security_config.ts";
import { createHttpHandler, type HttpFrontendOptions } from "./server.ts";

const APP = "http://app.test:3000";
const OTHER = "http://evil.test";
const engine = { isLive: () => true, isReady: () => true } as unknown as Engine;

function handler(options: HttpFrontendOptions = {}): (request: Request) => Promise<Response> {
  return createHttpHandler(engine, {
    security: resolveSecurityConfig({ accessToken: "secret" }),
    ...options,
  });
}

function preflight(
  path: string,
  origin: string,
  method: string,
  headers?: string,
): Request {
  return new Request(`http://localhost${path}`, {
    method: "OPTIONS",
    headers: {
      origin,
      "access-control-request-method": method,
      ...(headers === undefined ? {} : { "access-control-request-headers": headers }),
    },
  });
}

function corsHeaders(response: Response): Record<string, string> {
  return Object.fromEntries(
    [...response.headers].filter(([name]) => name.startsWith("access-control-") || name === "vary"),
  );
}

Deno.test("CORS unset: a preflight is answered as before (405) and answers carry no CORS header", async () => {
  const handle = handler();
  const answer = await handle(preflight("/v2/models/m/infer", APP, "POST", "content-type"));
  assert.equal(answer.status, 405);
  assert.deepEqual(await answer.json(), { error: "Method Not Allowed" });
  assert.deepEqual(corsHeaders(answer), {});
  const live = await handle(
    new Request("http://localhost/v2/health/live", { headers: { origin: APP } }),
  );
  assert.equal(live.status, 200);
  assert.deepEqual(corsHeaders(live), {});
});

Deno.test("CORS: a preflight from an allowed origin gets the method, the headers and max-age", async () => {
  const handle = handler({ cors: { origins: [APP], maxAge: 120 } });
  const answer = await handle(
    preflight(
      "/v2/models/m/infer",
      APP,
      "POST",
      "Content-Type, Inference-Header-Content-Length, triton-access-token",
    ),
  );
  assert.equal(answer.status, 204);
  assert.deepEqual(corsHeaders(answer), {
    "access-control-allow-origin": APP,
    "access-control-allow-methods": "POST",
    "access-control-allow-headers":
      "content-type, inference-header-content-length, triton-access-token",
    "access-control-max-age": "120",
    vary: "Origin, Access-Control-Request-Method, Access-Control-Request-Headers",
  });
  // No token is asked for on a preflight, though statistics are restricted.
  const stats = await handle(preflight("/v2/models/stats", APP, "GET"));
  assert.equal(stats.status, 204);
  assert.equal(stats.headers.get("access-control-allow-methods"), "GET");
});

Deno.test("CORS: a preflight from another origin, for another method or header, is refused", async () => {
  const handle = handler({ cors: { origins: [APP] } });
  const cases: [Request, number, string][] = [
    [preflight("/v2/health/live", OTHER, "GET"), 403, `CORS: origin '${OTHER}' is not allowed`],
    [
      preflight("/v2/health/live", APP, "POST"),
      403,
      "CORS: method 'POST' is not allowed on this path",
    ],
    [
      preflight("/v2/health/live", APP, "GET", "x-secret"),
      403,
      "CORS: request header 'x-secret' not allowed: expected content-type, content-encoding, inference-header-content-length, triton-access-token, authorization or a forwarded header",
    ],
    [preflight("/v3/nothing", APP, "GET"), 404, "Not Found"],
  ];
  for (const [request, status, error] of cases) {
    const answer = await handle(request);
    assert.equal(answer.status, status, error);
    assert.deepEqual(await answer.json(), { error });
    assert.equal(answer.headers.get("access-control-allow-origin"), null);
  }
});

Deno.test("CORS: answers to an allowed origin expose the binary data header; others get none", async () => {
  const handle = handler({ cors: { origins: [APP] } });
  const allowed = await handle(
    new Request("http://localhost/v2/health/live", { headers: { origin: APP } }),
  );
  assert.deepEqual(corsHeaders(allowed), {
    "access-control-allow-origin": APP,
    "access-control-expose-headers": "inference-header-content-length, content-encoding",
    vary: "Origin",
  });
  // A refused request still says where it came from: the browser reads the 401.
  const refused = await handle(
    new Request("http://localhost/v2/models/stats", { headers: { origin: APP } }),
  );
  assert.equal(refused.status, 401);
  assert.equal(refused.headers.get("access-control-allow-origin"), APP);
  const other = await handle(
    new Request("http://localhost/v2/health/live", { headers: { origin: OTHER } }),
  );
  assert.equal(other.status, 200);
  assert.deepEqual(corsHeaders(other), { vary: "Origin" });
  const none = await handle(new Request("http://localhost/v2/health/live"));
  assert.deepEqual(corsHeaders(none), {});
});

Deno.test("CORS: '*' answers any origin with '*'; credentials name the origin", async () => {
  const any = handler({ cors: { origins: ["*"] } });
  const answer = await any(
    new Request("http://localhost/v2/health/live", { headers: { origin: OTHER } }),
  );
  assert.equal(answer.headers.get("access-control-allow-origin"), "*");
  assert.equal(answer.headers.get("vary"), null);
  const credentialed = handler({ cors: { origins: [APP], allowCredentials: true } });
  const withCookies = await credentialed(preflight("/v2/health/live", APP, "GET"));
  assert.equal(withCookies.headers.get("access-control-allow-origin"), APP);
  assert.equal(withCookies.headers.get("access-control-allow-credentials"), "true");
  assert.throws(
    () => handler({ cors: { origins: ["*"], allowCredentials: true } }),
    /credentials need exact origins/,
  );
});

Deno.test("CORS: the OpenAI routes' API key header may be sent", async () => {
  const handle = handler({ cors: { origins: [APP] } });
  const answer = await handle(
    preflight("/v1/chat/completions", APP, "POST", "authorization, content-type"),
  );
  assert.equal(answer.status, 204);
  assert.equal(answer.headers.get("access-control-allow-headers"), "authorization, content-type");
});

Deno.test("CORS: headers the server forwards as parameters may be sent too", async () => {
  const handle = handler({ cors: { origins: [APP] }, headerForwardPattern: "^x-trace-" });
  const answer = await handle(preflight("/v2/models/m/infer", APP, "POST", "x-trace-id"));
  assert.equal(answer.status, 204);
  assert.equal(answer.headers.get("access-control-allow-headers"), "x-trace-id");
});
