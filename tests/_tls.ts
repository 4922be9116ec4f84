/**
 * TLS for the tests: certificates made with the openssl CLI at test time, and the TLS gRPC
 * server run in a process of its own (`_tls_server.ts`). Used by `grpc_tls_test.ts` and
 * `h2spec_test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { spawnServer } from "./_helpers.ts";

const decoder = new TextDecoder();

/** Runs a command; its success and its output. */
export async function run(command: string, args: string[]): Promise<{ ok: boolean; text: string }> {
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

/** Whether the openssl CLI runs here. */
export const opensslAvailable: boolean = (await run("openssl", ["version"])).ok;

/** PEM files of a test CA, a server (localhost, 127.0.0.1) and a client signed by it. */
export interface Certificates extends AsyncDisposable {
  readonly ca: string;
  readonly serverCert: string;
  readonly serverKey: string;
  readonly clientCert: string;
  readonly clientKey: string;
}

/** Makes a CA, and a server and a client certificate it signed, in a temporary folder. */
export async function makeCertificates(): Promise<Certificates> {
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

const SERVER = new URL("./_tls_server.ts", import.meta.url).pathname;

/**
 * Serves the Identity model with these TLS fields in a process of its own
 * (`tests/_tls_server.ts`), so that what a client does cannot end the test process, and a server
 * that dies is seen. (When grpc-js served TLS, grpc-js clients beside it in this process, with
 * the Triton core loaded, ended the test process now and then: nghttp2's assertion
 * `stream->closed_next == NULL`, or glibc's heap checks at exit: 5 of 95 runs of this file on
 * 2026-11-27, none of 30 with the built-in engine alone.)
 */
export async function tlsServer(
  engine: string,
  config: Record<string, unknown>,
): Promise<{ url: string } & AsyncDisposable> {
  const { child, firstLine, lines, log } = await spawnServer([
    "run",
    "-A",
    SERVER,
    engine,
    JSON.stringify(config),
  ]);
  return {
    url: firstLine,
    async [Symbol.asyncDispose](): Promise<void> {
      await child.stdin.close();
      const status = await child.status;
      await lines.cancel();
      assert.equal(status.code, 0, await log);
    },
  };
}

/** The port of a `grpc://` or `grpcs://` URL. */
export function portOf(url: string): number {
  return Number(new URL(url.replace(/^grpcs:/, "http:")).port);
}
