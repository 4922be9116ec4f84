/**
 * The instance module of the CUDA shared-memory Worker test: answers `x` as `y`, and `where` says
 * what the callable got (`DeviceTensor float32 [4] cuda:0`, or `host`) and which GPU its Worker
 * has current (`ctx.data` is the CUDA driver library).
 *
 * @module
 */

import { currentGpu, isDeviceTensor, ndarray, type WorkerContext } from "../../mod.ts";
import type { AnyTensors, InferCallable } from "../../src/callable/types.ts";

/** Answers `x` as it came, device tensor or not. */
export default function factory(ctx: WorkerContext): InferCallable<AnyTensors, AnyTensors> {
  const driver = ctx.data as string;
  return (requests) =>
    requests.map(({ data: { x } }) => ({
      y: x!,
      where: ndarray([
        `${
          isDeviceTensor(x) ? `DeviceTensor ${x.dtype} [${x.shape}] ${x.deviceName}` : "host"
        } on a Worker with cuda:${currentGpu(driver) ?? "-"} current`,
      ], [1]),
    }));
}
