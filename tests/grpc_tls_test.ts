// gRPC over TLS and mutual TLS (grpcUseSsl, grpcUseSslMutual): a CA, a server certificate and a
// client certificate are made with the openssl CLI at test time. TLS clients (grpc-js, and
// Python's tritonclient.grpc when installed) are served; cleartext clients, and under mutual TLS
// clients without a certificate, are refused.

import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { Buffer } from "node:buffer";
import { ENGINES, PEERS_REQUIRED, startServer } from "./_helpers.ts";
import { TestGrpcClient } from "./grpc_test_client.ts";
import { codecs } from "../src/protocol/grpc_codec.ts";
import type { BindOptions } from "../mod.ts";
import { Triton } from "../mod.ts";

const decoder = new TextDecoder();

async function run(command: string, args: string[]): Promise<{ ok: boolean; text: string }> {
  try {
    const result = await new Deno.Command(command, { args, stdout: "piped", stderr: "piped" })
      .output();
    return {
      ok: result.success,
      text: decoder.decode(result.stdout) + decoder.decode(result.stderr),
    };
  } catch (error) {
    return { ok: false, text: String(error) };
  }
}

const opensslAvailable = (await run("openssl", ["version"])).ok;
const pythonTls = (await run("python3", ["-c", "import tritonclient.grpc"])).ok;

/** PEM files of a test CA, a server (localhost, 127.0.0.1) and a client signed by it. */
interface Certificates extends AsyncDisposable {
  readonly ca: string;
  readonly serverCert: string;
  readonly serverKey: string;
  readonly clientCert: string;
  readonly clientKey: string;
}

async function makeCertificates(): Promise<Certificates> {
  const dir = await Deno.makeTempDir({ prefix: "denotriton-tls-" });
  const path = (name: string): string => `${dir}/${name}`;
  const openssl = async (...args: string[]): Promise<void> => {
    const { ok, text } = await run("openssl", args);
    assert.ok(ok, `openssl ${args.join(" ")} failed:\n${text}`);
  };
  try {
    await openssl(
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-days",
      "1",
      "-subj",
      "/CN=DenoTriton test CA",
      "-keyout",
      path("ca.key"),
      "-out",
      path("ca.pem"),
    );
    // Certificates are X.509 v3 (with extensions): rustls, under Deno's TLS, refuses v1.
    const issue = async (name: string, subject: string, extensions: string): Promise<void> => {
      await Deno.writeTextFile(path(`${name}.ext`), extensions);
      await openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        subject,
        "-keyout",
        path(`${name}.key`),
        "-out",
        path(`${name}.csr`),
      );
      await openssl(
        "x509",
        "-req",
        "-days",
        "1",
        "-in",
        path(`${name}.csr`),
        "-CA",
        path("ca.pem"),
        "-CAkey",
        path("ca.key"),
        "-CAcreateserial",
        "-extfile",
        path(`${name}.ext`),
        "-out",
        path(`${name}.pem`),
      );
    };
    await issue(
      "server",
      "/CN=localhost",
      "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
    );
    await issue("client", "/CN=client", "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n");
  } catch (error) {
    await Deno.remove(dir, { recursive: true });
    throw error;
  }
  return {
    ca: path("ca.pem"),
    serverCert: path("server.pem"),
    serverKey: path("server.key"),
    clientCert: path("client.pem"),
    clientKey: path("client.key"),
    [Symbol.asyncDispose]: () => Deno.remove(dir, { recursive: true }),
  };
}

const IDENTITY: BindOptions = {
  modelName: "Identity",
  inferFunc: (requests) => requests.map((request) => ({ y: request.data.x! })),
  inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
  outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
};

function file(path: string): Buffer {
  return Buffer.from(Deno.readFileSync(path));
}

/** ServerLive over a channel with the given credentials; 10 s watchdog. */
async function live(url: string, credentials: grpc.ChannelCredentials): Promise<boolean> {
  using client = new TestGrpcClient(url, {
    credentials,
    deadlineMs: 10_000,
    // The certificate names localhost and 127.0.0.1; Deno's TLS takes no IP as server name.
    channelOptions: { "grpc.ssl_target_name_override": "localhost" },
  });
  const response = await client.call(
    "ServerLive",
    codecs.Empty,
    codecs.ServerLiveResponse,
    {},
  );
  return response.live;
}

async function refused(url: string, credentials: grpc.ChannelCredentials): Promise<void> {
  await assert.rejects(live(url, credentials), (error: grpc.ServiceError) => {
    assert.equal(error.code, grpc.status.UNAVAILABLE, `${error.code}: ${error.details}`);
    return true;
  });
}

/** Runs tritonclient.grpc over TLS against the server; returns what it printed. */
async function pythonClient(port: number, certs: Certificates, mutual: boolean): Promise<string> {
  const script = `
import sys
import numpy as np
import tritonclient.grpc as g
kwargs = dict(ssl=True, root_certificates=sys.argv[2])
if sys.argv[3] == "mutual":
    kwargs.update(private_key=sys.argv[4], certificate_chain=sys.argv[5])
client = g.InferenceServerClient(url="127.0.0.1:" + sys.argv[1], **kwargs)
x = g.InferInput("x", [1, 3], "FP32")
x.set_data_from_numpy(np.array([[1, 2, 3]], dtype=np.float32))
result = client.infer("Identity", [x], client_timeout=10)
print("live", client.is_server_live(client_timeout=10), "y", result.as_numpy("y").tolist())
`;
  const { ok, text } = await run("python3", [
    "-c",
    script,
    String(port),
    certs.ca,
    mutual ? "mutual" : "tls",
    certs.clientKey,
    certs.clientCert,
  ]);
  assert.ok(ok, `tritonclient.grpc over TLS failed:\n${text}`);
  return text.trim();
}

function portOf(url: string): number {
  return Number(new URL(url.replace(/^grpcs:/, "http:")).port);
}

for (const engine of ENGINES) {
  Deno.test({
    name: `gRPC TLS: TLS clients are served, cleartext clients refused [${engine}]`,
    ignore: !opensslAvailable && !PEERS_REQUIRED,
    async fn(): Promise<void> {
      assert.ok(opensslAvailable, "the openssl CLI is required");
      await using certs = await makeCertificates();
      await using triton = await startServer({
        engine,
        models: [IDENTITY],
        config: {
          allowHttp: false,
          grpcUseSsl: true,
          grpcServerCert: certs.serverCert,
          grpcServerKey: certs.serverKey,
        },
      });
      const url = triton.urls.grpc!;
      assert.match(url, /^grpcs:\/\/127\.0\.0\.1:\d+$/);
      // Cleartext first: a refused cleartext client must not disturb the TLS ones after it.
      await refused(url, grpc.credentials.createInsecure());
      assert.equal(await live(url, grpc.credentials.createSsl(file(certs.ca))), true);
      await refused(url, grpc.credentials.createInsecure());
      assert.equal(await live(url, grpc.credentials.createSsl(file(certs.ca))), true);
      // A client that does not trust the server's CA is refused too.
      await refused(url, grpc.credentials.createSsl());
      if (pythonTls || PEERS_REQUIRED) {
        assert.equal(
          await pythonClient(portOf(url), certs, false),
          "live True y [[1.0, 2.0, 3.0]]",
        );
      }
    },
  });

  Deno.test({
    name: `gRPC mutual TLS: clients need a certificate the root certificate signed [${engine}]`,
    ignore: !opensslAvailable && !PEERS_REQUIRED,
    async fn(): Promise<void> {
      assert.ok(opensslAvailable, "the openssl CLI is required");
      await using certs = await makeCertificates();
      await using triton = await startServer({
        engine,
        models: [IDENTITY],
        config: {
          allowHttp: false,
          grpcUseSslMutual: true,
          grpcServerCert: certs.serverCert,
          grpcServerKey: certs.serverKey,
          grpcRootCert: certs.ca,
        },
      });
      const url = triton.urls.grpc!;
      const ca = file(certs.ca);
      assert.equal(
        await live(
          url,
          grpc.credentials.createSsl(ca, file(certs.clientKey), file(certs.clientCert)),
        ),
        true,
      );
      await refused(url, grpc.credentials.createSsl(ca));
      await refused(url, grpc.credentials.createInsecure());
      // A certificate from another CA (the server's own, self-issued chain) is refused.
      await using other = await makeCertificates();
      await refused(
        url,
        grpc.credentials.createSsl(ca, file(other.clientKey), file(other.clientCert)),
      );
      if (pythonTls || PEERS_REQUIRED) {
        assert.equal(
          await pythonClient(portOf(url), certs, true),
          "live True y [[1.0, 2.0, 3.0]]",
        );
      }
    },
  });
}

Deno.test("gRPC TLS: an unreadable certificate fails run() naming the field", async () => {
  const triton = new Triton({
    engine: "builtin",
    config: {
      httpPort: 0,
      grpcPort: 0,
      allowMetrics: false,
      grpcUseSsl: true,
      grpcServerCert: "/nonexistent/denotriton/server.pem",
      grpcServerKey: "/nonexistent/denotriton/server.key",
    },
  });
  await assert.rejects(
    triton.run(),
    /^TritonError: Cannot start the gRPC front end: cannot read grpcServerCert \/nonexistent\/denotriton\/server\.pem: NotFound: /,
  );
  await triton.stop();
});
