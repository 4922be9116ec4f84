/**
 * Serves ParamsAndHeaders, forwarding headers that match `header.*`, until SIGINT/SIGTERM.
 *
 *     deno run -A examples/parameters_headers/server.ts
 *
 * @module
 */

import { Triton } from "../../mod.ts";
import { bindParamsAndHeaders, HEADER_PATTERN } from "./model.ts";

await using triton = new Triton({
  config: { httpHeaderForwardPattern: HEADER_PATTERN, grpcHeaderForwardPattern: HEADER_PATTERN },
});
await bindParamsAndHeaders(triton);
await triton.serve();
