/**
 * Serves the streaming Generator on ports 8000 (HTTP), 8001 (gRPC) and 8002 (metrics) until
 * SIGINT/SIGTERM.
 *
 *     deno run -A examples/streaming/server.ts
 *
 * Try it with Server-Sent Events:
 *
 *     curl -N -d '{"prompt": "once", "max_tokens": 5}' localhost:8000/v2/models/Generator/generate_stream
 *
 * @module
 */

import { Triton } from "../../mod.ts";
import { bindStreaming } from "./model.ts";

await using triton = new Triton();
await bindStreaming(triton);
await triton.serve();
