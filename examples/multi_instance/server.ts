/**
 * Serves Linear (two Worker instances) on ports 8000 (HTTP), 8001 (gRPC) and 8002 (metrics)
 * until SIGINT/SIGTERM.
 *
 *     deno run -A examples/multi_instance/server.ts
 *
 * @module
 */

import { Triton } from "../../mod.ts";
import { bindLinear } from "./model.ts";

await using triton = new Triton();
await bindLinear(triton);
await triton.serve();
