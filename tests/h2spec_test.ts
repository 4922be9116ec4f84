// HTTP/2 conformance of the gRPC port: h2spec (github.com/summerwind/h2spec 2.2.1: 145 tests of
// RFC 7540 / 9113 and HPACK) against the cleartext port on each engine, and against the TLS
// port (grpcUseSsl, `h2spec -t -k`) of a server in a process of its own, which must live through
// the suite. Every test must pass; none is excluded (each one's subject, a client speaking HTTP/2
// to the server, applies to a gRPC server as to any). Skipped without h2spec, except in CI
// (`.ci/run` installs it with `go install`).

import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { Buffer } from "node:buffer";
import { bindAddSub } from "../examples/add_sub/model.ts";
import { ENGINES, PEERS_REQUIRED, startServer } from "./_helpers.ts";
import { findH2spec } from "./_peers.ts";
import { makeCertificates, opensslAvailable, portOf, tlsServer } from "./_tls.ts";
import { TestGrpcClient } from "./grpc_test_client.ts";
import { codecs } from "../src/protocol/grpc_codec.ts";

const H2SPEC = await findH2spec();
const missing = "missing" in H2SPEC ? H2SPEC.missing : undefined;

/** h2spec's summary line, as numbers. */
interface Score {
  tests: number;
  passed: number;
  skipped: number;
  failed: number;
}

/** h2spec 2.2.1's whole suite, every test passed. */
const ALL_PASSED: Score = { tests: 145, passed: 145, skipped: 0, failed: 0 };

/**
 * Runs the whole h2spec suite against a port (`-t -k`: over TLS, not checking the certificate).
 *
 * @returns Its score, and its output for a failure's message.
 */
async function h2spec(port: number, tls: boolean): Promise<{ score: Score; output: string }> {
  if ("missing" in H2SPEC) assert.fail(`h2spec is required: ${missing}`);
  const result = await new Deno.Command(H2SPEC.path, {
    args: [...(tls ? ["-t", "-k"] : []), "-h", "127.0.0.1", "-p", String(port)],
    stdout: "piped",
    stderr: "piped",
    // A watchdog: the suite takes under a second when every test passes (2 s per test that
    // waits for an answer that never comes).
    signal: AbortSignal.timeout(300_000),
  }).output();
  const output = new TextDecoder().decode(result.stdout) +
    new TextDecoder().decode(result.stderr);
  const match = output.match(/(\d+) tests, (\d+) passed, (\d+) skipped, (\d+) failed/);
  assert.ok(match !== null, `h2spec printed no score:\n${output}`);
  const [tests, passed, skipped, failed] = match.slice(1).map(Number) as [
    number,
    number,
    number,
    number,
  ];
  return { score: { tests, passed, skipped, failed }, output };
}

/** The failures h2spec listed, for an assertion's message. */
function failures(output: string): string {
  const at = output.indexOf("Failures:");
  return at === -1 ? output.slice(-4000) : output.slice(at, at + 8000);
}

/** ServerLive over the given channel: the server still serves. */
async function live(
  url: string,
  options: ConstructorParameters<typeof TestGrpcClient>[1] = {},
): Promise<boolean> {
  using client = new TestGrpcClient(url, { deadlineMs: 10_000, ...options });
  const response = await client.call("ServerLive", codecs.Empty, codecs.ServerLiveResponse, {});
  return response.live;
}

for (const engine of ENGINES) {
  const name = `h2spec: every test passes on the cleartext gRPC port [${engine}]`;
  Deno.test({
    name: missing === undefined ? name : `${name} (skipped: ${missing})`,
    ignore: missing !== undefined && !PEERS_REQUIRED,
    async fn(): Promise<void> {
      await using triton = await startServer({ engine });
      await bindAddSub(triton);
      const { score, output } = await h2spec(portOf(triton.urls.grpc!), false);
      assert.deepEqual(score, ALL_PASSED, failures(output));
      assert.equal(await live(triton.urls.grpc!), true);
    },
  });

  const tlsName = `h2spec: the TLS gRPC port passes every test and the server lives on [${engine}]`;
  Deno.test({
    name: missing === undefined ? tlsName : `${tlsName} (skipped: ${missing})`,
    ignore: (missing !== undefined || !opensslAvailable) && !PEERS_REQUIRED,
    async fn(): Promise<void> {
      assert.ok(opensslAvailable, "the openssl CLI is required");
      await using certs = await makeCertificates();
      // Disposed first: stopping it checks that it exits 0 (a process the suite ended would not).
      await using server = await tlsServer(engine, {
        grpcUseSsl: true,
        grpcServerCert: certs.serverCert,
        grpcServerKey: certs.serverKey,
      });
      const { score, output } = await h2spec(portOf(server.url), true);
      assert.deepEqual(score, ALL_PASSED, failures(output));
      const alive = await live(server.url, {
        credentials: grpc.credentials.createSsl(Buffer.from(Deno.readFileSync(certs.ca))),
        // The certificate names localhost and 127.0.0.1; Deno's TLS takes no IP as server name.
        channelOptions: { "grpc.ssl_target_name_override": "localhost" },
      });
      assert.equal(alive, true);
    },
  });
}
