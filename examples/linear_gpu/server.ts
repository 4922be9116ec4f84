/**
 * Serves LinearGpu (two Worker instances on cuda:0) on ports 8000 (HTTP), 8001 (gRPC) and 8002
 * (metrics) until SIGINT/SIGTERM. Devices may be given as arguments (`cuda:0 cuda:1`).
 *
 *     deno run -A examples/linear_gpu/server.ts [device...]
 *
 * @module
 */

import { Triton } from "../../mod.ts";
import { bindLinearGpu } from "./model.ts";

await using triton = new Triton();
await bindLinearGpu(triton, Deno.args.length > 0 ? Deno.args : undefined);
await triton.serve();
