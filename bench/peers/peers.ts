/**
 * The servers of the peers benchmark: DenoTriton on both engines and the peers a team would
 * pick instead (tritonserver with the Python backend, FastAPI + uvicorn, LitServe, Ray Serve,
 * BentoML), each with its pinned venv, its natural request shape, the settings it runs with and
 * the command that serves one model.
 *
 * @module
 */

import { ensureVenv, exists, runCommand } from "../venv.ts";
import type { ModelName, Shape } from "./models.ts";

/** The servers compared. */
export const PEER_NAMES = [
  "builtin",
  "triton",
  "tritonserver",
  "fastapi",
  "litserve",
  "bentoml",
  "ray",
] as const;

/** A server's name. */
export type PeerName = typeof PEER_NAMES[number];

/** DenoTriton's two engines: what the others are divided into. */
export const DENO_ENGINES = ["builtin", "triton"] as const satisfies readonly PeerName[];

/** The repository's root. */
export const ROOT: string = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");
/** The peers' venvs (ignored by git, like every `.venv/`). */
export const VENVS = `${ROOT}/bench/peers/.venv`;
/** Logs and scratch files. */
export const WORK = `${ROOT}/bench/.work/peers`;
const PYTHON_DIR = `${ROOT}/bench/peers/python`;

/** The ports a server gets. */
export interface PeerPorts {
  /** HTTP. */
  readonly http: number;
  /** gRPC (KServe v2 servers). */
  readonly grpc: number;
  /** Metrics (KServe v2 servers). */
  readonly metrics: number;
}

/** How to start one server for one model. */
export interface PeerCommand {
  /** The program. */
  readonly command: string;
  /** Its arguments. */
  readonly args: readonly string[];
  /** Variables added to its environment. */
  readonly env: Readonly<Record<string, string>>;
  /** Its working directory. */
  readonly cwd: string;
}

/** A Python peer's venv. */
export interface PeerVenv {
  /** Its Python. */
  readonly python: string;
  /** Its `site-packages`. */
  readonly site: string;
  /** The Python's `LIBDIR` (tritonserver's Python-backend stub loads libpython from it). */
  readonly libDir: string;
  /** `major.minor`. */
  readonly pythonVersion: string;
  /** The installed versions of the distributions the peer lists. */
  readonly versions: Readonly<Record<string, string>>;
}

/** What a command needs besides the model and ports. */
export interface PeerContext {
  /** The venv, for Python peers. */
  readonly venv?: PeerVenv;
  /** A V8 inspector port (DenoTriton, to profile it). */
  readonly inspect?: number;
}

/** One server of the comparison. */
export interface PeerSpec {
  /** Its name. */
  readonly name: PeerName;
  /** Display name. */
  readonly title: string;
  /** Its natural HTTP JSON request. */
  readonly shape: Shape;
  /** Whether it speaks KServe v2 (perf_analyzer drives it too). */
  readonly kserve: boolean;
  /** The request target for the `fields` shape. */
  readonly path: (model: ModelName) => string;
  /** Pinned packages of its venv (none for DenoTriton). */
  readonly packages?: readonly string[];
  /** The distributions whose versions the report lists, and the venv's check. */
  readonly versions?: Readonly<Record<string, string>>;
  /** The settings it serves a model with, for the report. */
  readonly settings: (model: ModelName) => string;
  /** The command serving one model. */
  readonly command: (model: ModelName, ports: PeerPorts, context: PeerContext) => PeerCommand;
}

/** Two instances (one per core), except for the 5 ms model, which stands for one device. */
function perCore(model: ModelName): number {
  return model === "fixed_5ms" ? 1 : 2;
}

const BATCHED = new Set<ModelName>(["add_sub", "fixed_5ms", "cpu_2"]);

function denotriton(name: "builtin" | "triton", title: string): PeerSpec {
  return {
    name,
    title,
    shape: "kserve",
    kserve: true,
    path: (model) => `/v2/models/${model}/infer`,
    settings: (model) =>
      model === "cpu_2"
        ? "`workers()`: 2 Deno Workers; max batch 32"
        : BATCHED.has(model)
        ? "main-thread callable, 1 instance; max batch 32, no queue delay"
        : "main-thread callable; no batching",
    command: (model, ports, { inspect }) => ({
      command: Deno.execPath(),
      args: [
        "run",
        "-A",
        ...(inspect === undefined ? [] : [`--inspect=127.0.0.1:${inspect}`]),
        `${ROOT}/bench/peers/denotriton/server.ts`,
        "--engine",
        name,
        "--model",
        model,
        "--http-port",
        String(ports.http),
        "--grpc-port",
        String(ports.grpc),
        "--metrics-port",
        String(ports.metrics),
      ],
      env: {},
      cwd: ROOT,
    }),
  };
}

/** Every server, by name. */
export const PEERS: Readonly<Record<PeerName, PeerSpec>> = {
  builtin: denotriton("builtin", "DenoTriton built-in"),
  triton: denotriton("triton", "DenoTriton Triton core"),
  tritonserver: {
    name: "tritonserver",
    title: "tritonserver 2.51 (Python backend)",
    shape: "kserve",
    kserve: true,
    path: (model) => `/v2/models/${model}/infer`,
    // The wheel `deno task setup:triton` reads the core from brings tritonserver and its Python
    // backend; only it and numpy are installed (its Python dependencies are PyTriton's own).
    packages: ["--no-deps", "nvidia-pytriton==0.7.0", "numpy==1.26.4"],
    versions: { "nvidia-pytriton": "0.7.0", numpy: "1.26.4" },
    settings: (model) =>
      `Python-backend model, instance_group ${perCore(model)} × KIND_CPU; ` +
      (BATCHED.has(model) ? "dynamic batching, max 32, no queue delay" : "no batching"),
    command: (model, ports, { venv }) => {
      const { python, site, libDir } = venv!;
      const bin = python.slice(0, python.lastIndexOf("/"));
      return {
        command: `${site}/pytriton/tritonserver/bin/tritonserver`,
        args: [
          "--model-repository",
          `${ROOT}/bench/peers/tritonserver/models`,
          "--model-control-mode",
          "explicit",
          "--load-model",
          model,
          "--backend-directory",
          `${WORK}/tritonserver/backends`,
          "--http-address",
          "127.0.0.1",
          "--http-port",
          String(ports.http),
          "--grpc-address",
          "127.0.0.1",
          "--grpc-port",
          String(ports.grpc),
          "--metrics-address",
          "127.0.0.1",
          "--metrics-port",
          String(ports.metrics),
        ],
        env: {
          // The stub finds the venv (numpy) through the `python3` on PATH, as PyTriton sets it up.
          PATH: `${bin}:${Deno.env.get("PATH") ?? ""}`,
          LD_LIBRARY_PATH: [libDir, `${site}/nvidia_pytriton.libs`].filter(Boolean).join(":"),
        },
        cwd: ROOT,
      };
    },
  },
  fastapi: {
    name: "fastapi",
    title: "FastAPI + uvicorn",
    shape: "fields",
    kserve: false,
    path: (model) => `/${model}`,
    packages: ["fastapi==0.163.2", "uvicorn[standard]==0.54.0", "numpy==2.4.6"],
    versions: { fastapi: "0.163.2", uvicorn: "0.54.0", pydantic: "", numpy: "2.4.6" },
    settings: (model) =>
      `uvicorn --workers ${perCore(model)}, keep-alive 600 s, Pydantic bodies; ` +
      (model === "fixed_5ms" || model === "cpu_2" ? "`def` endpoint" : "`async def` endpoint") +
      "; no batching (FastAPI has none)",
    command: (model, ports, { venv }) => ({
      command: venv!.python,
      args: [
        "-m",
        "uvicorn",
        "fastapi_app:app",
        "--host",
        "127.0.0.1",
        "--port",
        String(ports.http),
        "--workers",
        String(perCore(model)),
        "--no-access-log",
        "--timeout-keep-alive",
        "600",
      ],
      env: { PEER_MODEL: model },
      cwd: PYTHON_DIR,
    }),
  },
  litserve: {
    name: "litserve",
    title: "LitServe",
    shape: "fields",
    kserve: false,
    path: () => "/predict",
    packages: ["litserve==0.2.19", "numpy==2.4.6"],
    versions: { litserve: "0.2.19", fastapi: "", uvicorn: "", pyzmq: "", numpy: "2.4.6" },
    settings: (model) =>
      `accelerator="cpu", workers_per_device=${perCore(model)}, fast_queue=True, ` +
      "num_api_servers = workers (LitServe's default), timeout and keep-alive 600 s; " +
      (BATCHED.has(model) ? "max_batch_size 32, batch_timeout 0" : "no batching"),
    command: (model, ports, { venv }) => ({
      command: venv!.python,
      args: ["litserve_app.py", "--model", model, "--port", String(ports.http)],
      env: {},
      cwd: PYTHON_DIR,
    }),
  },
  bentoml: {
    name: "bentoml",
    title: "BentoML",
    shape: "bentoml",
    kserve: false,
    path: (model) => `/${model}`,
    packages: ["bentoml==1.4.40", "numpy==2.4.6"],
    versions: { bentoml: "1.4.40", numpy: "2.4.6" },
    settings: (model) =>
      `workers=${model === "fixed_5ms" ? "1" : '"cpu_count" (2)'}, 1 thread, timeout 600 s; ` +
      (BATCHED.has(model)
        ? "batchable=True, max_batch_size 32, adaptive window (default latency budget)"
        : "not batchable"),
    command: (model, ports, { venv }) => ({
      command: venv!.python,
      args: [
        venv!.python.replace(/python$/, "bentoml"),
        "serve",
        `bentoml_service:${BENTOML_CLASSES[model]}`,
        "--host",
        "127.0.0.1",
        "--port",
        String(ports.http),
      ],
      // BentoML keeps its store under BENTOML_HOME and reports usage unless told not to.
      env: { BENTOML_HOME: `${WORK}/bentoml-home`, BENTOML_DO_NOT_TRACK: "True" },
      cwd: PYTHON_DIR,
    }),
  },
  ray: {
    name: "ray",
    title: "Ray Serve",
    shape: "fields",
    kserve: false,
    path: () => "/",
    packages: ["ray[serve]==2.60.0", "numpy==2.4.6"],
    versions: { ray: "2.60.0", fastapi: "", uvicorn: "", numpy: "2.4.6" },
    settings: (model) =>
      `num_replicas=${perCore(model)} (1 CPU each), proxy keep-alive 600 s` +
      (BATCHED.has(model)
        ? ", max_ongoing_requests 32; @serve.batch max 32, wait 0"
        : ", max_ongoing_requests 5 (default); no batching") +
      "; RAY_SERVE_THROUGHPUT_OPTIMIZED=1",
    command: (model, ports, { venv }) => ({
      command: venv!.python,
      args: ["ray_app.py", "--model", model, "--port", String(ports.http)],
      // Ray's usage statistics stay off (nothing leaves the machine); the performance guide's
      // throughput mode is on.
      env: { RAY_USAGE_STATS_ENABLED: "0", RAY_SERVE_THROUGHPUT_OPTIMIZED: "1" },
      cwd: PYTHON_DIR,
    }),
  },
};

const BENTOML_CLASSES: Readonly<Record<ModelName, string>> = {
  identity_small: "IdentitySmall",
  identity_large: "IdentityLarge",
  add_sub: "AddSub",
  fixed_5ms: "Fixed5ms",
  cpu_2: "Cpu2",
};

/**
 * The Python check that a venv holds the pinned versions.
 *
 * @param versions Distribution → version ("" for any).
 * @returns Python code that exits non-zero otherwise.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { versionProbe } from "./peers.ts";
 *
 * assert.equal(
 *   versionProbe({ litserve: "0.2.19", pyzmq: "" }),
 *   "from importlib.metadata import version as v; assert v('litserve') == '0.2.19'; v('pyzmq')",
 * );
 * ```
 */
export function versionProbe(versions: Readonly<Record<string, string>>): string {
  return "from importlib.metadata import version as v; " +
    Object.entries(versions).map(([name, pin]) =>
      pin === "" ? `v('${name}')` : `assert v('${name}') == '${pin}'`
    ).join("; ");
}

/**
 * Makes a Python peer's venv (`bench/peers/.venv/<peer>`) hold its pinned packages.
 *
 * @param peer The peer.
 * @returns The venv, or why it cannot be had.
 */
export async function ensurePeerVenv(peer: PeerSpec): Promise<PeerVenv | { missing: string }> {
  if (peer.packages === undefined || peer.versions === undefined) {
    return { missing: `${peer.name} has no venv` };
  }
  const made = await ensureVenv({
    dir: `${VENVS}/${peer.name}`,
    packages: peer.packages,
    probe: versionProbe(peer.versions),
  });
  if ("missing" in made) return made;
  const names = Object.keys(peer.versions);
  const facts = await runCommand(made.python, [
    "-c",
    "import json, sys, sysconfig; from importlib.metadata import version as v; print(json.dumps({" +
    "'site': sysconfig.get_paths()['purelib'], 'libDir': sysconfig.get_config_var('LIBDIR') or ''," +
    " 'pythonVersion': '%d.%d' % sys.version_info[:2]," +
    ` 'versions': {n: v(n) for n in ${JSON.stringify(names)}}}))`,
  ]);
  if (!facts.ok) return { missing: `Cannot read ${made.python}: ${facts.text}` };
  return { python: made.python, ...JSON.parse(facts.text.split("\n").at(-1)!) };
}

/**
 * Lays out tritonserver's backend folder for a venv, as PyTriton does: the Python backend with
 * the stub built for the venv's Python beside it.
 *
 * @param venv The tritonserver venv.
 * @throws {Error} When the wheel lacks the backend or the stub.
 */
export async function prepareTritonserverBackends(venv: PeerVenv): Promise<void> {
  const source = `${venv.site}/pytriton/tritonserver`;
  const target = `${WORK}/tritonserver/backends/python`;
  await Deno.mkdir(target, { recursive: true });
  for (const file of ["libtriton_python.so", "triton_python_backend_utils.py"]) {
    await Deno.copyFile(`${source}/backends/python/${file}`, `${target}/${file}`);
  }
  const stub = `${source}/python_backend_stubs/${venv.pythonVersion}/triton_python_backend_stub`;
  if (!await exists(stub)) throw new Error(`No Python ${venv.pythonVersion} backend stub: ${stub}`);
  await Deno.copyFile(stub, `${target}/triton_python_backend_stub`);
  await Deno.chmod(`${target}/triton_python_backend_stub`, 0o755);
}
