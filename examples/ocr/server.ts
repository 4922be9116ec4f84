/**
 * Serves the OCR model (two Worker instances) on ports 8000 (HTTP), 8001 (gRPC) and 8002
 * (metrics) until SIGINT/SIGTERM; with `--pipelines`, also the split pipeline (`OcrDetect`,
 * `OcrRecognize`, and the two that chain them: `OcrPipeline`, a callable calling both, and
 * `OcrEnsemble`, an ensemble).
 *
 *     deno run -A examples/ocr/server.ts [instances] [--pipelines]
 *
 * @module
 */

import { Triton } from "../../mod.ts";
import { bindOcr, bindOcrPipelines } from "./model.ts";

const args = Deno.args.filter((arg) => arg !== "--pipelines");
await using triton = new Triton();
await bindOcr(triton, { instances: Number(args[0] ?? 2) });
if (Deno.args.includes("--pipelines")) await bindOcrPipelines(triton, { instances: 1 });
await triton.serve();
