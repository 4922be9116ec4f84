/**
 * A CUDA shared-memory client in a process of its own, for tests against the stand-in CUDA
 * driver: the driver refuses to open a process's own IPC handles (as CUDA does), so the device
 * memory a test registers with the server must come from another process. It allocates device
 * memory on cuda:0, hands out its IPC handle, writes and reads floats, and frees it, one JSON
 * command per line on stdin, one JSON answer per line on stdout:
 *
 * - `{"op":"alloc","bytes":16,"values":[1,2]}` → `{"pointer":"<decimal>","handle":"<base64>"}`
 * - `{"op":"read","pointer":"<decimal>","floats":4}` → `{"values":[...]}`
 * - `{"op":"free","pointer":"<decimal>"}` → `{}`
 *
 * Usage: `deno run --allow-ffi --allow-read tests/_gpu/cuda_client.ts <stand-in driver path>`.
 *
 * @module
 */

const SYMBOLS = {
  cuInit: { parameters: ["u32"], result: "i32" },
  cuDevicePrimaryCtxRetain: { parameters: ["buffer", "i32"], result: "i32" },
  cuCtxSetCurrent: { parameters: ["pointer"], result: "i32" },
  cuMemAlloc_v2: { parameters: ["buffer", "usize"], result: "i32" },
  cuMemFree_v2: { parameters: ["u64"], result: "i32" },
  cuMemcpyHtoD_v2: { parameters: ["u64", "buffer", "usize"], result: "i32" },
  cuMemcpyDtoH_v2: { parameters: ["buffer", "u64", "usize"], result: "i32" },
  cuIpcGetMemHandle: { parameters: ["buffer", "u64"], result: "i32" },
} as const;

const path = Deno.args[0];
if (path === undefined) throw new Error("usage: cuda_client.ts <stand-in CUDA driver>");
const driver = Deno.dlopen(path, SYMBOLS).symbols;

function check(call: string, result: number): void {
  if (result !== 0) throw new Error(`${call} failed: CUresult ${result}`);
}

check("cuInit", driver.cuInit(0));
const context = new BigUint64Array(1);
check("cuDevicePrimaryCtxRetain", driver.cuDevicePrimaryCtxRetain(context, 0));
check("cuCtxSetCurrent", driver.cuCtxSetCurrent(Deno.UnsafePointer.create(context[0]!)));

interface Command {
  op: "alloc" | "read" | "free";
  bytes?: number;
  values?: number[];
  pointer?: string;
  floats?: number;
}

function run(command: Command): unknown {
  switch (command.op) {
    case "alloc": {
      const slot = new BigUint64Array(1);
      check("cuMemAlloc", driver.cuMemAlloc_v2(slot, BigInt(command.bytes!)));
      const values = new Float32Array(command.values ?? []);
      if (values.length > 0) {
        check("cuMemcpyHtoD", driver.cuMemcpyHtoD_v2(slot[0]!, values, BigInt(values.byteLength)));
      }
      const handle = new Uint8Array(64);
      check("cuIpcGetMemHandle", driver.cuIpcGetMemHandle(handle, slot[0]!));
      return { pointer: slot[0]!.toString(), handle: btoa(String.fromCharCode(...handle)) };
    }
    case "read": {
      const out = new Float32Array(command.floats!);
      check(
        "cuMemcpyDtoH",
        driver.cuMemcpyDtoH_v2(out, BigInt(command.pointer!), BigInt(out.byteLength)),
      );
      return { values: [...out] };
    }
    case "free":
      check("cuMemFree", driver.cuMemFree_v2(BigInt(command.pointer!)));
      return {};
  }
}

const encoder = new TextEncoder();
let pending = "";
for await (const chunk of Deno.stdin.readable.pipeThrough(new TextDecoderStream())) {
  pending += chunk;
  let newline: number;
  while ((newline = pending.indexOf("\n")) >= 0) {
    const line = pending.slice(0, newline);
    pending = pending.slice(newline + 1);
    let answer: unknown;
    try {
      answer = run(JSON.parse(line));
    } catch (error) {
      answer = { error: (error as Error).message };
    }
    await Deno.stdout.write(encoder.encode(`${JSON.stringify(answer)}\n`));
  }
}
