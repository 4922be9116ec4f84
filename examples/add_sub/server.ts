/**
 * Serves AddSub on ports 8000 (HTTP), 8001 (gRPC) and 8002 (metrics) until SIGINT/SIGTERM.
 *
 *     deno run -A examples/add_sub/server.ts
 *
 * @module
 */

import { Triton } from "../../mod.ts";
import { bindAddSub } from "./model.ts";

await using triton = new Triton();
await bindAddSub(triton);
await triton.serve();
