/**
 * Replicas behind a balancer: three DenoTriton servers (subprocesses running
 * `tests/_replica_server.ts`) behind nginx as the L7 balancer on loopback. Load goes through
 * nginx while one replica is stopped with SIGTERM and started again; no request may fail.
 *
 * What makes that hold: on SIGTERM a replica turns not-ready (400, as Triton) and answers new
 * requests with 503
 * while it drains the ones in flight, and only then closes its listener; nginx sends a request
 * that failed to connect, or got 502/503, to the next replica, POSTs included
 * (`proxy_next_upstream ... non_idempotent`: an inference on a stateless model may run twice).
 * `deploy/README.md` describes the pattern; `deploy/nginx.conf` is the same configuration.
 *
 * Needs nginx (`DENOTRITON_NGINX`, else `nginx` on the PATH or `/usr/sbin/nginx`): skipped
 * without it, failed in CI.
 *
 * @module
 */

import assert from "node:assert/strict";
import { ENGINES, PEERS_REQUIRED } from "./_helpers.ts";
import type { EngineKind } from "../src/engine/engine.ts";

const SERVER = new URL("./_replica_server.ts", import.meta.url).pathname;
const NGINX_TEMPLATE = new URL("../deploy/nginx.conf", import.meta.url).pathname;
const decoder = new TextDecoder();

async function findNginx(): Promise<string | undefined> {
  const candidates = [
    Deno.env.get("DENOTRITON_NGINX"),
    ...(Deno.env.get("PATH") ?? "").split(":").filter((dir) => dir !== "").map((dir) =>
      `${dir}/nginx`
    ),
    "/usr/sbin/nginx",
  ];
  for (const candidate of candidates) {
    if (candidate === undefined) continue;
    try {
      if ((await Deno.stat(candidate)).isFile) return candidate;
    } catch {
      // Not there.
    }
  }
  return undefined;
}

const NGINX = await findNginx();

/** Rejects with `what` when `promise` takes longer than `ms`: a watchdog, not a timing check. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`Watchdog: ${what} took over ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

/** One replica subprocess; its log is kept for failure messages. */
class Replica {
  readonly name: string;
  readonly child: Deno.ChildProcess;
  log = "";
  url: Promise<string>;
  exited: Promise<Deno.CommandStatus>;

  constructor(name: string, engine: EngineKind, httpPort: number) {
    this.name = name;
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", SERVER],
      env: {
        REPLICA_NAME: name,
        DENOTRITON_ENGINE: engine,
        DENOTRITON_TRITON_CONFIG_HTTP_ADDRESS: "127.0.0.1",
        DENOTRITON_TRITON_CONFIG_HTTP_PORT: String(httpPort),
        DENOTRITON_TRITON_CONFIG_GRPC_ADDRESS: "127.0.0.1",
        DENOTRITON_TRITON_CONFIG_GRPC_PORT: "0",
        DENOTRITON_TRITON_CONFIG_METRICS_ADDRESS: "127.0.0.1",
        DENOTRITON_TRITON_CONFIG_METRICS_PORT: "0",
      },
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).spawn();
    this.child = child;
    const found = Promise.withResolvers<string>();
    this.url = found.promise;
    this.exited = child.status;
    void (async () => {
      for await (const chunk of child.stderr) {
        this.log += decoder.decode(chunk, { stream: true });
        const url = this.log.match(/HTTP\/REST \(KServe v2\) listening at (http:\/\/\S+)/)?.[1];
        if (url !== undefined) found.resolve(url);
      }
      found.reject(new Error(`Replica ${name} exited before it listened:\n${this.log}`));
    })();
    this.exited.then(() => found.reject(new Error(`Replica ${name} exited:\n${this.log}`)));
  }

  /** Waits until `/v2/health/ready` answers 200. */
  async ready(): Promise<string> {
    const url = await within(this.url, 60_000, `replica ${this.name} to listen`);
    await within(
      (async () => {
        for (;;) {
          const response = await fetch(`${url}/v2/health/ready`).catch(() => undefined);
          await response?.body?.cancel();
          if (response?.status === 200) return;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      })(),
      60_000,
      `replica ${this.name} to be ready`,
    );
    return url;
  }

  kill(signal: Deno.Signal): void {
    try {
      this.child.kill(signal);
    } catch {
      // Exited already.
    }
  }
}

/** Writes the nginx configuration for the replicas' ports and starts nginx in the foreground. */
async function startNginx(
  dir: string,
  listenPort: number,
  upstreamPorts: readonly number[],
): Promise<Deno.ChildProcess> {
  const template = await Deno.readTextFile(NGINX_TEMPLATE);
  const servers = upstreamPorts.map((port) =>
    `    server 127.0.0.1:${port} max_fails=1 fail_timeout=1s;`
  ).join("\n");
  // The deploy template balances a Kubernetes Service; here the upstreams are the loopback
  // replicas, and every path nginx writes lives in the temporary folder.
  const config = `
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
${
    template
      .replace(/^ *#.*\n/gm, "")
      .replace(
        /upstream denotriton \{[^}]*\}/,
        `upstream denotriton {\n${servers}\n    keepalive 32;\n  }`,
      )
      .replace(/listen 8080;/, `listen 127.0.0.1:${listenPort};`)
      .replace(/access_log [^;]*;/, `access_log ${dir}/access.log upstreams;`)
      .replace(
        /http \{/,
        `http {
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;`,
      )
  }`;
  await Deno.writeTextFile(`${dir}/nginx.conf`, config);
  return new Deno.Command(NGINX!, {
    args: ["-p", dir, "-c", `${dir}/nginx.conf`, "-e", `${dir}/error.log`],
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
}

/** The outcome of one load request. */
type Outcome = { ok: true; replica: string } | { ok: false; error: string };

async function infer(base: string, value: number, delayMs: number): Promise<Outcome> {
  try {
    const response = await fetch(`${base}/v2/models/Echo/infer`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        parameters: { delay_ms: delayMs },
        inputs: [{ name: "x", datatype: "INT64", shape: [1], data: [value] }],
      }),
      signal: AbortSignal.timeout(20_000),
    });
    const text = await response.text();
    if (response.status !== 200) return { ok: false, error: `HTTP ${response.status}: ${text}` };
    const body = JSON.parse(text) as { outputs: { name: string; data: unknown[] }[] };
    const y = body.outputs.find((output) => output.name === "y")?.data[0];
    const replica = body.outputs.find((output) => output.name === "replica")?.data[0];
    if (y !== value) return { ok: false, error: `y is ${y}, expected ${value}` };
    return { ok: true, replica: String(replica) };
  } catch (error) {
    return { ok: false, error: String(error) };
  }
}

for (const engine of ENGINES) {
  Deno.test({
    name: `replicas: 3 replicas (${engine} engine) behind nginx, one restarted with SIGTERM` +
      (NGINX === undefined ? " (skipped: nginx not found)" : ""),
    ignore: NGINX === undefined && !PEERS_REQUIRED,
    async fn(): Promise<void> {
      assert.ok(NGINX, "nginx is required: apt-get install nginx, or set DENOTRITON_NGINX");
      const dir = await Deno.makeTempDir({ prefix: "denotriton_replicas_" });
      // nginx's workers drop root and write request bodies to its temp folders.
      await Deno.chmod(dir, 0o777);
      const replicas: Replica[] = [];
      let nginx: Deno.ChildProcess | undefined;
      let stopLoad = false;
      try {
        const ports = [freePort(), freePort(), freePort()];
        replicas.push(...["a", "b", "c"].map((name, i) => new Replica(name, engine, ports[i]!)));
        await Promise.all(replicas.map((replica) => replica.ready()));
        const balancerPort = freePort();
        nginx = await startNginx(dir, balancerPort, ports);
        const balancer = `http://127.0.0.1:${balancerPort}`;
        await within(
          (async () => {
            for (;;) {
              const response = await fetch(`${balancer}/v2/health/ready`).catch(() => undefined);
              await response?.body?.cancel();
              if (response?.status === 200) return;
              await new Promise((resolve) => setTimeout(resolve, 20));
            }
          })(),
          30_000,
          "nginx to serve",
        );

        // Eight clients loop through nginx until told to stop.
        const answered = new Map<string, number>();
        const failures: string[] = [];
        let requests = 0;
        const clients = Array.from({ length: 8 }, async (_, client) => {
          for (let i = 0; !stopLoad; i++) {
            const outcome = await infer(balancer, client * 1_000_000 + i, 5);
            requests++;
            if (outcome.ok) answered.set(outcome.replica, (answered.get(outcome.replica) ?? 0) + 1);
            else failures.push(outcome.error);
          }
        });
        const pause = (ms: number): Promise<void> =>
          new Promise((resolve) => setTimeout(resolve, ms));
        await pause(1000);

        // A slow request straight to replica a is in flight when it is told to stop: it must be
        // answered (drain), and a must turn not-ready before its listener closes.
        const victim = replicas[0]!;
        const victimUrl = await victim.url;
        const slow = infer(victimUrl, 42, 800);
        await pause(100);
        const servedBefore = answered.get("a") ?? 0;
        const terminated = performance.now();
        victim.kill("SIGTERM");
        const readiness: string[] = [];
        const watching = (async () => {
          for (;;) {
            const response = await fetch(`${victimUrl}/v2/health/ready`).catch(() => undefined);
            await response?.body?.cancel();
            const seen = response === undefined ? "closed" : String(response.status);
            if (readiness.at(-1) !== seen) readiness.push(seen);
            if (seen === "closed") return;
            await pause(10);
          }
        })();
        const slowOutcome = await within(slow, 20_000, "the in-flight request on replica a");
        const status = await within(victim.exited, 30_000, "replica a to exit on SIGTERM");
        const drained = performance.now();
        await within(watching, 5_000, "replica a's listener to close");

        // The replacement takes the same port, as a restarted container would.
        const replacement = new Replica("a2", engine, ports[0]!);
        replicas.push(replacement);
        await replacement.ready();
        const restarted = performance.now();
        // nginx takes a replica back once its fail_timeout has passed: the load goes on until the
        // replacement has served some of it.
        await within(
          (async () => {
            while ((answered.get("a2") ?? 0) < 20) await pause(50);
          })(),
          30_000,
          "the replacement to take load through nginx",
        );
        stopLoad = true;
        await within(Promise.all(clients), 30_000, "the load clients to finish");

        const log = await Deno.readTextFile(`${dir}/access.log`);
        const retried = log.split("\n").filter((line) => line.split("|")[2]?.includes(","));
        console.log(
          `replicas (${engine}): ${requests} requests through nginx, ${failures.length} failed; ` +
            `answered by ${JSON.stringify(Object.fromEntries([...answered].sort()))}; ` +
            `nginx passed ${retried.length} on to another replica; SIGTERM to exit ` +
            `${((drained - terminated) / 1000).toFixed(2)} s, to the replacement ready ` +
            `${((restarted - terminated) / 1000).toFixed(2)} s; readiness of a: ${
              readiness.join(" -> ")
            }`,
        );
        assert.deepEqual(failures.slice(0, 5), [], `${failures.length} requests failed`);
        assert.deepEqual(slowOutcome, { ok: true, replica: "a" });
        assert.equal(status.code, 0, victim.log);
        assert.match(victim.log, /Signal received: draining in-flight requests/);
        // The first probes may come before the signal is handled. Not ready is 400, as in
        // Triton's HTTP server (a Kubernetes probe fails on any status from 400 up).
        assert.deepEqual(
          readiness[0] === "200" ? readiness.slice(1) : readiness,
          ["400", "closed"],
          `readiness of a went ${readiness.join(" -> ")}: expected 400 before the listener closed`,
        );
        assert.ok(servedBefore > 0, "replica a served load before SIGTERM");
        for (const name of ["b", "c"]) assert.ok((answered.get(name) ?? 0) > 0, name);
      } finally {
        stopLoad = true;
        for (const replica of replicas) replica.kill("SIGTERM");
        nginx?.kill("SIGQUIT");
        const exits = [
          ...replicas.map((replica) => replica.exited),
          ...(nginx ? [nginx.status] : []),
        ];
        await within(Promise.all(exits), 30_000, "replicas and nginx to exit").catch(() => {
          for (const replica of replicas) replica.kill("SIGKILL");
          nginx?.kill("SIGKILL");
        });
        await Promise.allSettled(exits);
        await Deno.remove(dir, { recursive: true });
      }
    },
  });
}
