/**
 * Serves TextDirection (one Worker instance on cuda:0, on the CPU where there is no GPU) on ports
 * 8000 (HTTP), 8001 (gRPC) and 8002 (metrics) until SIGINT/SIGTERM. Devices may be given as
 * arguments (`cuda:0 cuda:1 cpu`).
 *
 *     deno run -A examples/text_direction/server.ts [device...]
 *
 * @module
 */

import { Triton } from "../../mod.ts";
import { bindTextDirection } from "./model.ts";

await using triton = new Triton();
await bindTextDirection(triton, Deno.args.length > 0 ? { devices: Deno.args } : {});
await triton.serve();
