// Access tokens over HTTP and gRPC: no token / wrong token / right token against restricted and
// open endpoint groups, the default list, a custom list, an empty list and invalid names.
// HTTP answers 401 without a token and 403 with a wrong one; gRPC UNAUTHENTICATED and
// PERMISSION_DENIED.

import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { type BindOptions, Triton } from "../mod.ts";
import type { SecurityConfig } from "../src/config/security_config.ts";
import { codecs } from "../src/protocol/grpc_codec.ts";
import { ENGINES, startServer } from "./_helpers.ts";
import { TestGrpcClient } from "./grpc_test_client.ts";

const TOKEN = "s3cret-Token_for.tests";

function echoModel(): BindOptions {
  return {
    modelName: "Echo",
    inferFunc: (requests) => requests.map((r) => ({ y: r.data.x! })),
    inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
    outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
  };
}

type Credential = "none" | "wrong" | "right";

function httpHeaders(credential: Credential, token = TOKEN): HeadersInit {
  if (credential === "none") return {};
  return { "triton-access-token": credential === "right" ? token : `${token}x` };
}

function grpcMetadata(credential: Credential, token = TOKEN): grpc.Metadata {
  const metadata = new grpc.Metadata();
  if (credential !== "none") {
    metadata.set(
      "triton-grpc-protocol-triton-access-token",
      credential === "right" ? token : token.slice(1),
    );
  }
  return metadata;
}

const HTTP_ENDPOINTS: Record<string, { method: string; path: string; body?: string }> = {
  health: { method: "GET", path: "/v2/health/ready" },
  metadata: { method: "GET", path: "/v2/models/Echo" },
  "model-config": { method: "GET", path: "/v2/models/Echo/config" },
  inference: {
    method: "POST",
    path: "/v2/models/Echo/infer",
    body: JSON.stringify({ inputs: [{ name: "x", datatype: "FP32", shape: [1, 1], data: [1] }] }),
  },
  statistics: { method: "GET", path: "/v2/models/stats" },
  "model-repository": { method: "POST", path: "/v2/repository/index", body: "{}" },
  logging: { method: "GET", path: "/v2/logging" },
};

async function httpStatus(
  triton: Triton,
  group: string,
  credential: Credential,
  token?: string,
): Promise<{ status: number; error?: string }> {
  const endpoint = HTTP_ENDPOINTS[group]!;
  const response = await fetch(`${triton.urls.http}${endpoint.path}`, {
    method: endpoint.method,
    headers: httpHeaders(credential, token),
    ...(endpoint.body === undefined ? {} : { body: endpoint.body }),
  });
  const text = await response.text();
  if (response.status < 400) return { status: response.status };
  return { status: response.status, error: JSON.parse(text).error };
}

const INFER_BYTES = codecs.ModelInferRequest.encode({
  model_name: "Echo",
  inputs: [{ name: "x", datatype: "FP32", shape: [1, 1], contents: { fp32_contents: [1] } }],
});

const GRPC_ENDPOINTS: Record<string, { rpc: string; bytes: Uint8Array; service?: string }> = {
  health: { rpc: "ServerReady", bytes: new Uint8Array() },
  metadata: { rpc: "ModelMetadata", bytes: codecs.ModelRef.encode({ name: "Echo" }) },
  "model-config": { rpc: "ModelConfig", bytes: codecs.ModelRef.encode({ name: "Echo" }) },
  inference: { rpc: "ModelInfer", bytes: INFER_BYTES },
  statistics: { rpc: "ModelStatistics", bytes: new Uint8Array() },
  "model-repository": { rpc: "RepositoryIndex", bytes: new Uint8Array() },
};

async function grpcCode(
  client: TestGrpcClient,
  group: string,
  credential: Credential,
  token?: string,
): Promise<{ code: number; details?: string }> {
  const endpoint = GRPC_ENDPOINTS[group]!;
  try {
    await client.raw(endpoint.rpc, endpoint.bytes, grpcMetadata(credential, token));
    return { code: grpc.status.OK };
  } catch (error) {
    const { code, details } = error as grpc.ServiceError;
    return { code, details };
  }
}

async function withServer(
  engine: (typeof ENGINES)[number],
  securityConfig: SecurityConfig,
  body: (triton: Triton, client: TestGrpcClient) => Promise<void>,
): Promise<void> {
  await using triton = await startServer({
    engine,
    models: [echoModel()],
    securityConfig,
    config: { allowMetrics: false },
  });
  using client = new TestGrpcClient(triton.urls.grpc!);
  await body(triton, client);
}

const DEFAULT_RESTRICTED = ["statistics", "model-repository", "logging"];
const DEFAULT_OPEN = ["health", "metadata", "model-config", "inference"];

for (const engine of ENGINES) {
  Deno.test(`security (${engine}): default list, token matrix over HTTP and gRPC`, async () => {
    await withServer(engine, { accessToken: TOKEN }, async (triton, client) => {
      assert.equal(triton.getAccessToken(), TOKEN);
      for (const group of DEFAULT_RESTRICTED) {
        assert.deepEqual(await httpStatus(triton, group, "none"), {
          status: 401,
          error: "This API is restricted, expecting header 'triton-access-token'",
        }, group);
        assert.deepEqual(await httpStatus(triton, group, "wrong"), {
          status: 403,
          error:
            "This API is restricted: the 'triton-access-token' header does not hold the access token",
        }, group);
        assert.deepEqual(await httpStatus(triton, group, "right"), { status: 200 }, group);
        if (GRPC_ENDPOINTS[group] === undefined) continue;
        assert.deepEqual(await grpcCode(client, group, "none"), {
          code: grpc.status.UNAUTHENTICATED,
          details:
            "This protocol is restricted, expecting header 'triton-grpc-protocol-triton-access-token'",
        }, group);
        assert.equal((await grpcCode(client, group, "wrong")).code, grpc.status.PERMISSION_DENIED);
        assert.equal((await grpcCode(client, group, "right")).code, grpc.status.OK, group);
      }
      for (const group of DEFAULT_OPEN) {
        for (const credential of ["none", "wrong", "right"] as const) {
          assert.equal((await httpStatus(triton, group, credential)).status, 200, group);
          assert.equal((await grpcCode(client, group, credential)).code, grpc.status.OK, group);
        }
      }
      // The health service of gRPC is open by default too.
      await client.raw("Check", new Uint8Array(), new grpc.Metadata(), "/grpc.health.v1.Health/");
    });
  });
}

Deno.test("security: a custom list restricts inference, also on streams and gRPC health", async () => {
  await withServer(
    "builtin",
    { accessToken: TOKEN, restrictedEndpoints: ["inference", "health"] },
    async (triton, client) => {
      assert.equal((await httpStatus(triton, "inference", "none")).status, 401);
      assert.equal((await httpStatus(triton, "inference", "wrong")).status, 403);
      assert.equal((await httpStatus(triton, "inference", "right")).status, 200);
      assert.equal((await httpStatus(triton, "health", "none")).status, 401);
      assert.equal((await httpStatus(triton, "statistics", "none")).status, 200);
      assert.equal((await grpcCode(client, "inference", "none")).code, grpc.status.UNAUTHENTICATED);
      assert.equal((await grpcCode(client, "inference", "right")).code, grpc.status.OK);
      assert.equal((await grpcCode(client, "statistics", "none")).code, grpc.status.OK);
      await assert.rejects(
        client.raw("Check", new Uint8Array(), new grpc.Metadata(), "/grpc.health.v1.Health/"),
        (error: grpc.ServiceError) => error.code === grpc.status.UNAUTHENTICATED,
      );
      for (const credential of ["none", "wrong"] as const) {
        const stream = client.stream(grpcMetadata(credential));
        stream.write({
          model_name: "Echo",
          inputs: [{
            name: "x",
            datatype: "FP32",
            shape: [1, 1],
            contents: { fp32_contents: [1] },
          }],
        });
        stream.end();
        assert.equal(await stream.next(), undefined);
        const status = await stream.status;
        assert.equal(
          status.code,
          credential === "none" ? grpc.status.UNAUTHENTICATED : grpc.status.PERMISSION_DENIED,
        );
      }
      const stream = client.stream(grpcMetadata("right"));
      stream.write({
        model_name: "Echo",
        inputs: [{ name: "x", datatype: "FP32", shape: [1, 1], contents: { fp32_contents: [1] } }],
      });
      stream.end();
      const first = await stream.next();
      assert.equal(first?.error_message ?? "", "");
      assert.equal(first?.infer_response?.model_name, "Echo");
      assert.equal((await stream.status).code, grpc.status.OK);
    },
  );
});

Deno.test("security: an empty list restricts nothing and generates no token", async () => {
  await withServer("builtin", { restrictedEndpoints: [] }, async (triton, client) => {
    assert.equal(triton.getAccessToken(), undefined);
    for (const group of [...DEFAULT_RESTRICTED, ...DEFAULT_OPEN]) {
      assert.equal((await httpStatus(triton, group, "none")).status, 200, group);
      assert.equal((await httpStatus(triton, group, "wrong")).status, 200, group);
    }
    assert.equal((await grpcCode(client, "statistics", "none")).code, grpc.status.OK);
  });
  // A given token is kept and reported even when nothing is restricted.
  assert.equal(
    new Triton({ securityConfig: { accessToken: TOKEN, restrictedEndpoints: [] } })
      .getAccessToken(),
    TOKEN,
  );
});

Deno.test("security: a generated token guards the default list", async () => {
  await withServer("builtin", {}, async (triton, client) => {
    const token = triton.getAccessToken()!;
    assert.match(token, /^[A-Za-z0-9_-]{43}$/);
    assert.equal((await httpStatus(triton, "statistics", "none")).status, 401);
    assert.equal((await httpStatus(triton, "statistics", "right", token)).status, 200);
    assert.equal((await grpcCode(client, "statistics", "right", token)).code, grpc.status.OK);
    assert.equal(
      (await grpcCode(client, "statistics", "wrong", token)).code,
      grpc.status.PERMISSION_DENIED,
    );
  });
  // The facade's own default (no securityConfig) restricts too.
  const triton = new Triton();
  assert.match(triton.getAccessToken()!, /^[A-Za-z0-9_-]{43}$/);
});

Deno.test("security: unknown endpoint names are refused", () => {
  assert.throws(
    () => new Triton({ securityConfig: { restrictedEndpoints: ["statistics", "stats"] } }),
    {
      name: "TritonValidationError",
      message:
        'Invalid endpoint names: "stats" (valid: health, metadata, inference, shared-memory, model-config, model-repository, statistics, trace, logging, openai)',
    },
  );
});
