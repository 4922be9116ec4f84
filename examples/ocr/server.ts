/**
 * Serves the OCR model (two Worker instances) on ports 8000 (HTTP), 8001 (gRPC) and 8002
 * (metrics) until SIGINT/SIGTERM.
 *
 *     deno run -A examples/ocr/server.ts [instances]
 *
 * @module
 */

import { Triton } from "../../mod.ts";
import { bindOcr } from "./model.ts";

await using triton = new Triton();
await bindOcr(triton, { instances: Number(Deno.args[0] ?? 2) });
await triton.serve();
