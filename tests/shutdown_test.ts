// Shutdown always ends: a server whose callable never returns gets SIGTERM; after its exit
// timeout the request in flight fails with 503 and the process exits, on both engines, with the
// callable on the main thread or in a Worker.

import assert from "node:assert/strict";
import { ENGINES, watchdog } from "./_helpers.ts";

const SERVER = new URL("./_shutdown_server.ts", import.meta.url).pathname;

/** Reads a child's stream into `text`, resolving `until` matches as soon as they appear. */
class Output {
  text = "";
  #waiters: { pattern: RegExp; resolve: (match: RegExpMatchArray) => void }[] = [];
  readonly done: Promise<void>;

  constructor(stream: ReadableStream<Uint8Array>) {
    this.done = (async () => {
      for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
        this.text += chunk;
        this.#waiters = this.#waiters.filter(({ pattern, resolve }) => {
          const match = this.text.match(pattern);
          if (match !== null) resolve(match);
          return match === null;
        });
      }
    })();
  }

  until(pattern: RegExp): Promise<RegExpMatchArray> {
    const match = this.text.match(pattern);
    if (match !== null) return Promise.resolve(match);
    return new Promise((resolve) => this.#waiters.push({ pattern, resolve }));
  }
}

for (const engine of ENGINES) {
  for (const kind of ["main", "worker"] as const) {
    Deno.test(`SIGTERM with a hung ${kind}-thread callable ends the ${engine} server`, async () => {
      const child = new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", SERVER, engine, kind],
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const stdout = new Output(child.stdout);
      const stderr = new Output(child.stderr);
      try {
        const [, url] = await watchdog(
          stderr.until(/HTTP\/REST \(KServe v2\) listening at (http:\/\/\S+)/),
          "the server to listen",
        );
        const infer = (): Promise<{ status: number; body: unknown }> =>
          fetch(`${url}/v2/models/Hang/infer`, {
            method: "POST",
            body: JSON.stringify({
              inputs: [{ name: "x", datatype: "FP32", shape: [1], data: [1] }],
            }),
          }).then(async (response) => ({ status: response.status, body: await response.json() }));
        const running = infer();
        await watchdog(stdout.until(/running/), "the callable to start");
        // A second request waits in the queue behind the first.
        const queued = infer();
        await new Promise((resolve) => setTimeout(resolve, 200));
        const signalled = performance.now();
        child.kill("SIGTERM");
        const status = await watchdog(child.status, "the process to exit");
        const seconds = (performance.now() - signalled) / 1000;
        await Promise.all([stdout.done, stderr.done]);
        console.log(`${engine}/${kind}: exited ${seconds.toFixed(2)} s after SIGTERM`);
        assert.equal(status.code, 0, stderr.text);
        assert.match(stdout.text, /served/);
        const stopped = {
          status: 503,
          body: { error: "Server stopped before the request completed" },
        };
        assert.deepEqual(await watchdog(running, "the running request's reply"), stopped);
        assert.deepEqual(await watchdog(queued, "the queued request's reply"), stopped);
      } finally {
        try {
          child.kill("SIGKILL");
        } catch {
          // Already exited.
        }
      }
    });
  }
}
