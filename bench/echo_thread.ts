/**
 * One HTTP thread of `bench/engines_http.ts`'s echo ceiling with `--http-threads` above 1: a
 * Worker that serves the same bare JSON echo on the shared port (`reusePort`), as DenoTriton's
 * HTTP threads do, so that the engines' cells with N threads have a ceiling served the same way.
 * It is sent the port to join (0 for the first thread) and answers the port it listens on.
 *
 * @module
 */

/// <reference lib="deno.worker" />

self.onmessage = (event: MessageEvent<{ port: number }>) => {
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: event.data.port, reusePort: true, onListen: () => {} },
    async (request) =>
      new Response(JSON.stringify(await request.json()), {
        headers: { "content-type": "application/json" },
      }),
  );
  self.postMessage(server.addr.port);
};
