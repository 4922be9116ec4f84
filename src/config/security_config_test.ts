import assert from "node:assert/strict";
import { TritonValidationError } from "../errors.ts";
import {
  DEFAULT_RESTRICTED_ENDPOINTS,
  resolveSecurityConfig,
  type SecurityConfig,
  tokensEqual,
  VALID_ENDPOINTS,
} from "./security_config.ts";

Deno.test("resolveSecurityConfig() restricts the default endpoints with a fresh token", () => {
  const first = resolveSecurityConfig();
  assert.deepEqual([...first.restrictedEndpoints], [
    "shared-memory",
    "model-repository",
    "statistics",
    "trace",
    "logging",
  ]);
  assert.deepEqual(
    [...resolveSecurityConfig({}).restrictedEndpoints],
    DEFAULT_RESTRICTED_ENDPOINTS,
  );
  assert.match(first.accessToken ?? "", /^[A-Za-z0-9_-]{43}$/);
  assert.notEqual(resolveSecurityConfig().accessToken, first.accessToken);
});

Deno.test("resolveSecurityConfig() keeps a given token", () => {
  const security = resolveSecurityConfig({ accessToken: "s3cret" });
  assert.equal(security.accessToken, "s3cret");
  assert.equal(security.restrictedEndpoints.size, DEFAULT_RESTRICTED_ENDPOINTS.length);
});

Deno.test("resolveSecurityConfig() with an empty list restricts nothing", () => {
  const open = resolveSecurityConfig({ restrictedEndpoints: [] });
  assert.equal(open.restrictedEndpoints.size, 0);
  assert.equal(open.accessToken, undefined);
  const withToken = resolveSecurityConfig({ restrictedEndpoints: [], accessToken: "t" });
  assert.equal(withToken.restrictedEndpoints.size, 0);
  assert.equal(withToken.accessToken, "t");
});

Deno.test("resolveSecurityConfig() takes a custom list", () => {
  const security = resolveSecurityConfig({ restrictedEndpoints: ["inference", "health"] });
  assert.deepEqual([...security.restrictedEndpoints], ["inference", "health"]);
  assert.ok(security.restrictedEndpoints.has("inference"));
  assert.ok(!security.restrictedEndpoints.has("statistics"));
  assert.match(security.accessToken ?? "", /^[A-Za-z0-9_-]{43}$/);
  const all = resolveSecurityConfig({ restrictedEndpoints: VALID_ENDPOINTS });
  assert.equal(all.restrictedEndpoints.size, 10);
});

Deno.test("resolveSecurityConfig() rejects unknown endpoint names", () => {
  assert.throws(
    () => resolveSecurityConfig({ restrictedEndpoints: ["inference", "model_config", "admin"] }),
    (error: unknown) => {
      assert.ok(error instanceof TritonValidationError);
      assert.equal(
        error.message,
        'Invalid endpoint names: "model_config", "admin" (valid: health, metadata, inference, shared-memory, model-config, model-repository, statistics, trace, logging, openai)',
      );
      return true;
    },
  );
});

Deno.test("resolveSecurityConfig() rejects bad tokens and unknown fields", () => {
  for (const accessToken of ["", "has space", "line\nbreak", "caf\u00e9"]) {
    assert.throws(() => resolveSecurityConfig({ accessToken }), {
      name: "TritonValidationError",
      message:
        "Invalid SecurityConfig: accessToken must be a non-empty string of visible ASCII characters",
    });
  }
  assert.throws(
    () => resolveSecurityConfig({ token: "x" } as unknown as SecurityConfig),
    { name: "TritonValidationError", message: 'Invalid SecurityConfig: unknown field "token"' },
  );
  assert.throws(
    () => resolveSecurityConfig({ restrictedEndpoints: "trace" } as unknown as SecurityConfig),
    { name: "TritonValidationError", message: /^Invalid SecurityConfig: restrictedEndpoints: / },
  );
});

Deno.test("tokensEqual() compares whole tokens", () => {
  assert.equal(tokensEqual("abc", "abc"), true);
  assert.equal(tokensEqual("", ""), true);
  assert.equal(tokensEqual("abc", "abd"), false);
  assert.equal(tokensEqual("abc", "ab"), false);
  assert.equal(tokensEqual("ab", "abc"), false);
  assert.equal(tokensEqual("", "a"), false);
  assert.equal(tokensEqual("caf\u00e9", "caf\u00e9"), true);
  assert.equal(tokensEqual("caf\u00e9", "cafe"), false);
  // A shorter token padded with NUL bytes must still differ.
  assert.equal(tokensEqual("abc", "abc\0"), false);
  const token = resolveSecurityConfig().accessToken ?? "";
  assert.equal(tokensEqual(token, token.slice()), true);
});
