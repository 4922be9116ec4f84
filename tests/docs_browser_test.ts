/**
 * The docs page and CORS in a real browser (issue 37): Debian's headless Chromium, driven by
 * playwright-core, opens `/docs`, runs "Try it out" on a model's own infer path against the same
 * server, and keeps screenshots (`.cache/test-output/docs_page_<engine>.png` and
 * `docs_try_it_<engine>.png`, or under `DENOTRITON_TEST_OUTPUT`); and a page served from another origin calls `infer` with `fetch`:
 * answered when the server allows that origin, blocked by the browser when it allows another, or
 * when CORS is off. `.ci/run` installs Chromium; elsewhere the tests skip without it.
 *
 * @module
 */

import assert from "node:assert/strict";
import { type Browser, chromium } from "playwright-core";
import { ENGINES, PEERS_REQUIRED, startServer } from "./_helpers.ts";
import { openApiModels } from "./_openapi_models.ts";

const CHROMIUM = "/usr/bin/chromium";
const HAS_CHROMIUM = (() => {
  try {
    return Deno.statSync(CHROMIUM).isFile;
  } catch {
    return false;
  }
})();
if (!HAS_CHROMIUM && PEERS_REQUIRED) {
  throw new Error(`Chromium is missing at ${CHROMIUM}: .ci/run installs Debian's chromium`);
}

const OUTPUT = Deno.env.get("DENOTRITON_TEST_OUTPUT") ??
  new URL("../.cache/test-output", import.meta.url).pathname;

/** Flags that work as root in a container, and keep Chromium from calling out. */
const FLAGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

// Playwright's pipes to the browser outlive a test's own ops; each test closes the browser.
const browserTest = { ignore: !HAS_CHROMIUM, sanitizeOps: false, sanitizeResources: false };

async function withBrowser(run: (browser: Browser) => Promise<void>): Promise<void> {
  // A fresh profile (Playwright's temporary user data dir) each time.
  // Under .ci/asan the server runs with AddressSanitizer preloaded; the browser must not.
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: FLAGS,
    env: { ...Deno.env.toObject(), LD_PRELOAD: "" },
  });
  try {
    await run(browser);
  } finally {
    await browser.close();
  }
}

const ADD_SUB = {
  inputs: [
    { name: "a", datatype: "FP32", shape: [1, 2], data: [1, 2] },
    { name: "b", datatype: "FP32", shape: [1, 2], data: [3, 4] },
  ],
};

for (const engine of ENGINES) {
  Deno.test({
    ...browserTest,
    name:
      `Chromium opens /docs and runs "Try it out" on AddSub's infer against the server [${engine}]`,
    async fn(): Promise<void> {
      await using triton = await startServer({ engine, models: openApiModels() });
      const base = triton.urls.http!;
      await withBrowser(async (browser) => {
        const page = await browser.newPage({ viewport: { width: 1280, height: 1600 } });
        const elsewhere: string[] = [];
        const problems: string[] = [];
        page.on("request", (request) => {
          if (!request.url().startsWith(`${base}/`)) elsewhere.push(request.url());
        });
        page.on("console", (message) => {
          if (message.type() === "error") problems.push(message.text());
        });
        page.on("pageerror", (error) => problems.push(error.message));
        await page.goto(`${base}/docs`);
        await page.locator(".opblock-tag").first().waitFor();
        await Deno.mkdir(OUTPUT, { recursive: true });
        const shot = `${OUTPUT}/docs_page_${engine}.png`;
        await page.screenshot({ path: shot });
        console.log(`Screenshot of the docs page: ${shot}`);
        const operation = page.locator(
          '.opblock-summary-path[data-path="/v2/models/AddSub/infer"]',
        );
        await operation.first().click();
        const block = page.locator(".opblock", { has: operation }).first();
        await block.locator(".try-out__btn").click();
        await block.locator(".execute").click();
        const status = block.locator(".live-responses-table tr.response .response-col_status")
          .first();
        await status.waitFor();
        assert.equal((await status.textContent())?.trim(), "200");
        // The example (zeros) went to this server, and its answer is shown.
        const body = await block.locator(".live-responses-table .microlight").first()
          .textContent();
        assert.deepEqual(JSON.parse(body!), {
          model_name: "AddSub",
          model_version: "1",
          outputs: [
            { name: "add", datatype: "FP32", shape: [1, 1], data: [0] },
            { name: "sub", datatype: "FP32", shape: [1, 1], data: [0] },
          ],
        });
        const tried = `${OUTPUT}/docs_try_it_${engine}.png`;
        await page.screenshot({ path: tried });
        console.log(`Screenshot of "Try it out": ${tried}`);
        // Offline: nothing but this server was asked for anything; no script or CSP error.
        assert.deepEqual(elsewhere, []);
        assert.deepEqual(problems, []);
      });
    },
  });

  Deno.test({
    ...browserTest,
    name: `a page from another origin calls infer: allowed with CORS, blocked without [${engine}]`,
    async fn(): Promise<void> {
      // Two pages of their own origins (another port is another origin).
      const pages = [0, 1].map(() =>
        Deno.serve(
          { hostname: "127.0.0.1", port: 0, onListen: () => {} },
          () =>
            new Response("<!doctype html><title>app</title>", {
              headers: { "content-type": "text/html" },
            }),
        )
      );
      const [allowed, other] = pages.map((server) => `http://127.0.0.1:${server.addr.port}`);
      try {
        await using open = await startServer({
          engine,
          models: openApiModels(),
          config: { httpCorsOrigins: [allowed!] },
        });
        await using closed = await startServer({ engine, models: openApiModels() });
        await withBrowser(async (browser) => {
          const page = await browser.newPage();
          const call = (server: string, binary: boolean): Promise<unknown> =>
            page.evaluate(async ({ url, body, binary }) => {
              try {
                const response = await fetch(url, {
                  method: "POST",
                  headers: { "content-type": "application/json" },
                  body: JSON.stringify(
                    binary ? { ...body, parameters: { binary_data_output: true } } : body,
                  ),
                });
                if (!binary) return await response.json();
                // The binary data extension's header is exposed, so the page can split the body.
                const length = Number(response.headers.get("inference-header-content-length"));
                const bytes = new Uint8Array(await response.arrayBuffer());
                return {
                  json: JSON.parse(new TextDecoder().decode(bytes.subarray(0, length))),
                  add: [...new Float32Array(bytes.slice(length, length + 8).buffer)],
                };
              } catch (error) {
                return `blocked: ${error}`;
              }
            }, { url: `${server}/v2/models/AddSub/infer`, body: ADD_SUB, binary });

          await page.goto(`${allowed}/`);
          assert.deepEqual(await call(open.urls.http!, false), {
            model_name: "AddSub",
            model_version: "1",
            outputs: [
              { name: "add", datatype: "FP32", shape: [1, 2], data: [4, 6] },
              { name: "sub", datatype: "FP32", shape: [1, 2], data: [-2, -2] },
            ],
          });
          const binary = await call(open.urls.http!, true) as {
            json: { outputs: { parameters: unknown }[] };
            add: number[];
          };
          assert.deepEqual(binary.add, [4, 6]);
          assert.deepEqual(binary.json.outputs[0]!.parameters, { binary_data_size: 8 });
          // CORS off (nothing changes when it is unset): the browser blocks the answer.
          assert.equal(await call(closed.urls.http!, false), "blocked: TypeError: Failed to fetch");

          await page.goto(`${other}/`);
          assert.equal(await call(open.urls.http!, false), "blocked: TypeError: Failed to fetch");
        });
      } finally {
        for (const server of pages) await server.shutdown();
      }
    },
  });
}
