/**
 * Serves the Accumulator on ports 8000 (HTTP), 8001 (gRPC) and 8002 (metrics) until
 * SIGINT/SIGTERM.
 *
 *     deno run -A examples/accumulator/server.ts
 *
 * @module
 */

import { Triton } from "../../mod.ts";
import { bindAccumulator } from "./model.ts";

await using triton = new Triton();
await bindAccumulator(triton);
await triton.serve();
