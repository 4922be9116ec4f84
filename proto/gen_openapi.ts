/**
 * Regenerates `proto/openapi.json`, the OpenAPI document of a DenoTriton server started with the
 * defaults and no models (the access token's default restricted groups, the shared-memory and
 * docs routes), so the repository can publish the HTTP API's description. Run it with
 * `deno task gen:openapi`; `tests/openapi_test.ts` fails when the file and a default server's
 * `/v2/openapi.json` differ. A server with models adds each model's own paths.
 *
 * @module
 */

import { Triton } from "../mod.ts";

/** Where the document goes. */
export const OPENAPI_FILE: URL = new URL("./openapi.json", import.meta.url);

/**
 * The document a default server without models serves.
 *
 * @returns The document, as `/v2/openapi.json` answers it.
 */
export async function defaultOpenApiDocument(): Promise<unknown> {
  await using triton = new Triton({
    engine: "builtin",
    config: {
      httpAddress: "127.0.0.1",
      httpPort: 0,
      grpcAddress: "127.0.0.1",
      grpcPort: 0,
      metricsPort: 0,
    },
  });
  await triton.run();
  const response = await fetch(`${triton.urls.http}/v2/openapi.json`, {
    headers: { "triton-access-token": triton.getAccessToken()! },
  });
  if (!response.ok) throw new Error(`/v2/openapi.json answered ${response.status}`);
  return await response.json();
}

if (import.meta.main) {
  await Deno.writeTextFile(
    OPENAPI_FILE,
    `${JSON.stringify(await defaultOpenApiDocument(), null, 2)}\n`,
  );
}
