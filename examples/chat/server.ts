/**
 * Serves SmolLM2 on the OpenAI API (and KServe v2) on ports 8000 (HTTP), 8001 (gRPC) and 8002
 * (metrics) until SIGINT/SIGTERM. Set it up once with `deno task setup:smollm2`.
 *
 *     deno run -A examples/chat/server.ts [instances]
 *
 * @module
 */

import { Triton } from "../../mod.ts";
import { bindSmollm2 } from "./model.ts";

await using triton = new Triton();
const instances = Deno.args[0] === undefined ? undefined : Number(Deno.args[0]);
await bindSmollm2(triton, instances === undefined ? {} : { instances });
await triton.serve();
