// gRPC over TLS and mutual TLS (grpcUseSsl, grpcUseSslMutual): a CA, a server certificate and a
// client certificate are made with the openssl CLI at test time. TLS clients (grpc-js, and
// Python's tritonclient.grpc when installed) are served; cleartext clients, and under mutual TLS
// clients without a certificate, are refused.

import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { Buffer } from "node:buffer";
import { ENGINES, PEERS_REQUIRED } from "./_helpers.ts";
import {
  type Certificates,
  makeCertificates,
  opensslAvailable,
  portOf,
  run,
  tlsServer,
} from "./_tls.ts";
import { TestGrpcClient } from "./grpc_test_client.ts";
import { codecs } from "../src/protocol/grpc_codec.ts";
import { frame, FrameType, PREFACE } from "../src/frontend/grpc/h2/frames.ts";
import { Triton } from "../mod.ts";

const pythonTls = (await run("python3", ["-c", "import tritonclient.grpc"])).ok;

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

/**
 * A cleartext HTTP/2 client is refused: the server answers its preface with no HTTP/2 frame (it
 * ends the connection, or sends a TLS alert). Raw bytes rather than grpc-js's insecure client:
 * that client, against a grpc-js TLS server in the same process, crashed Deno's HTTP/2 (nghttp2's
 * assertion `stream->closed_next == NULL` in `find_stream_on_goaway_func`) in 3 of 55 runs of this
 * file on 2026-11-27.
 */
async function refusedCleartext(url: string): Promise<void> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: portOf(url) });
  try {
    await conn.write(PREFACE);
    // An empty SETTINGS frame, as a client sends after its preface.
    await conn.write(frame({ type: FrameType.SETTINGS, flags: 0, stream: 0 }));
    const answer: number[] = [];
    const buffer = new Uint8Array(1024);
    const timer = setTimeout(() => conn.close(), 5000);
    try {
      for (;;) {
        const n = await conn.read(buffer).catch(() => null);
        if (n === null) break;
        answer.push(...buffer.subarray(0, n));
      }
    } finally {
      clearTimeout(timer);
    }
    // A server speaking HTTP/2 would answer with a SETTINGS frame (type 4 in byte 3); a TLS
    // server sends nothing or an alert record (content type 21).
    assert.ok(answer.length === 0 || answer[0] === 21, `an answer: ${answer.slice(0, 16)}`);
  } finally {
    try {
      conn.close();
    } catch {
      // Closed above.
    }
  }
}

/**
 * Identity over TLS with `elements` float32 values: returns whether they came back intact. 3 MiB
 * is several times what the TLS connection holds before it pauses its socket (`h2/tls.ts`).
 */
async function identity(url: string, ca: Buffer, elements: number): Promise<boolean> {
  using client = new TestGrpcClient(url, {
    credentials: grpc.credentials.createSsl(ca),
    deadlineMs: 30_000,
    channelOptions: {
      "grpc.ssl_target_name_override": "localhost",
      "grpc.max_receive_message_length": -1,
    },
  });
  const x = new Float32Array(elements).map((_, i) => i);
  const response = await client.call(
    "ModelInfer",
    codecs.ModelInferRequest,
    codecs.ModelInferResponse,
    {
      model_name: "Identity",
      inputs: [{ name: "x", datatype: "FP32", shape: [1, elements] }],
      raw_input_contents: [new Uint8Array(x.buffer)],
    },
  );
  const y = response.raw_output_contents?.[0] ?? new Uint8Array();
  return Buffer.from(y).equals(Buffer.from(x.buffer));
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

for (const engine of ENGINES) {
  Deno.test({
    name: `gRPC TLS: TLS clients are served, cleartext clients refused [${engine}]`,
    ignore: !opensslAvailable && !PEERS_REQUIRED,
    async fn(): Promise<void> {
      assert.ok(opensslAvailable, "the openssl CLI is required");
      await using certs = await makeCertificates();
      await using server = await tlsServer(engine, {
        grpcUseSsl: true,
        grpcServerCert: certs.serverCert,
        grpcServerKey: certs.serverKey,
      });
      const url = server.url;
      assert.match(url, /^grpcs:\/\/127\.0\.0\.1:\d+$/);
      // Cleartext first: a refused cleartext client must not disturb the TLS ones after it.
      await refusedCleartext(url);
      assert.equal(await live(url, grpc.credentials.createSsl(file(certs.ca))), true);
      await refusedCleartext(url);
      assert.equal(await live(url, grpc.credentials.createSsl(file(certs.ca))), true);
      assert.equal(await identity(url, file(certs.ca), 786_432), true);
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
      await using server = await tlsServer(engine, {
        grpcUseSslMutual: true,
        grpcServerCert: certs.serverCert,
        grpcServerKey: certs.serverKey,
        grpcRootCert: certs.ca,
      });
      const url = server.url;
      const ca = file(certs.ca);
      assert.equal(
        await live(
          url,
          grpc.credentials.createSsl(ca, file(certs.clientKey), file(certs.clientCert)),
        ),
        true,
      );
      await refused(url, grpc.credentials.createSsl(ca));
      await refusedCleartext(url);
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
