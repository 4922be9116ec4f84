/**
 * The OCR example: a real model (PP-OCRv4 detection + recognition on ONNX Runtime) on two
 * Worker instances, on every engine, over HTTP and gRPC; plus its pre- and post-processing.
 *
 * The images are rendered here from known text with DejaVu Sans (Debian's `fonts-dejavu-core`,
 * installed by `.ci/run`); without the font the end-to-end tests skip locally and fail in CI.
 *
 * @module
 */

import assert from "node:assert/strict";
import { ENGINES, PEERS_REQUIRED, startServer } from "./_helpers.ts";
import { ClientInferenceServerError } from "../src/client/mod.ts";
import { InferenceError } from "../mod.ts";
import { runClient } from "../examples/ocr/client.ts";
import {
  bindOcr,
  bindOcrPipelines,
  OCR_ENSEMBLE,
  OCR_MODEL,
  OCR_PIPELINE,
} from "../examples/ocr/model.ts";
import { detectionBoxes, detectionInput } from "../examples/ocr/detection.ts";
import { minAreaRect, type Point, rectCorners, unclip } from "../examples/ocr/geometry.ts";
import { decodeImage } from "../examples/ocr/image.ts";
import { ctcClasses, ctcDecode, recognitionInput } from "../examples/ocr/recognition.ts";
import { FONT_PATH, fontAvailable, renderText } from "../examples/ocr/render.ts";

const FONT = fontAvailable();
const fontMissing = FONT ? "" : ` (skipped: no font at ${FONT_PATH})`;

Deno.test("ocr: CTC decoding merges repeats, drops blanks and keeps the trailing space", () => {
  const classes = ctcClasses("a\nb\nc");
  assert.deepEqual(classes, ["", "a", "b", "c", " "]);
  // Steps: a a blank a space b b -> "aa b".
  const best = [1, 1, 0, 1, 4, 2, 2];
  const probs = new Float32Array(best.length * classes.length);
  best.forEach((k, t) => {
    probs.fill(0.05, t * 5, t * 5 + 5);
    probs[t * 5 + k] = 0.8;
  });
  const [decoded] = ctcDecode(probs, [1, best.length, classes.length], classes);
  assert.equal(decoded!.text, "aa b");
  assert.ok(Math.abs(decoded!.score - 0.8) < 1e-6);
  assert.throws(
    () => ctcDecode(probs, [1, 5, 7], classes),
    /it has 7 classes, the dictionary gives 5/,
  );
});

Deno.test("ocr: minimum-area rectangle of a rotated block, corners and unclip", () => {
  // Corners of a 40 x 10 rectangle turned by 30 degrees around (100, 50), and points inside.
  const angle = Math.PI / 6;
  const [ux, uy] = [Math.cos(angle), Math.sin(angle)];
  const points: Point[] = [];
  for (let u = -20; u <= 20; u += 5) {
    for (let v = -5; v <= 5; v += 5) points.push([100 + u * ux - v * uy, 50 + u * uy + v * ux]);
  }
  const rect = minAreaRect(points);
  assert.ok(Math.abs(rect.width * rect.height - 400) < 1e-6, `area ${rect.width * rect.height}`);
  assert.ok(Math.abs(Math.max(rect.width, rect.height) - 40) < 1e-6);
  assert.ok(Math.abs(rect.center[0] - 100) < 1e-6 && Math.abs(rect.center[1] - 50) < 1e-6);
  const axis = { ...minAreaRect([[0, 0], [30, 0], [30, 6], [0, 6], [15, 3]]) };
  const [tl, tr, br, bl] = rectCorners(axis).map(([x, y]) => [Math.round(x), Math.round(y)]);
  assert.deepEqual([tl, tr, br, bl], [[0, 0], [30, 0], [30, 6], [0, 6]]);
  // Offset = area * ratio / perimeter = 180 * 2 / 72 = 5 on every side.
  const grown = unclip(axis, 2);
  assert.deepEqual([grown.width, grown.height].sort((a, b) => a - b), [16, 40]);
});

Deno.test("ocr: detection input is normalised BGR in multiples of 32; boxes map back", () => {
  const image = { width: 100, height: 50, data: new Uint8Array(100 * 50 * 3).fill(255) };
  const input = detectionInput(image);
  assert.deepEqual(input.dims, [1, 3, 64, 96]);
  // White: (1 - mean) / std per channel, B first.
  assert.ok(Math.abs(input.data[0]! - (1 - 0.485) / 0.229) < 1e-5);
  assert.ok(Math.abs(input.data[64 * 96 * 2]! - (1 - 0.406) / 0.225) < 1e-5);
  // A 40 x 8 block of text probability in a 96 x 64 map; the image is 192 x 128.
  const prob = new Float32Array(96 * 64);
  for (let y = 20; y < 28; y++) prob.fill(0.9, y * 96 + 30, y * 96 + 70);
  const boxes = detectionBoxes(prob, 96, 64, { width: 192, height: 128 });
  assert.equal(boxes.length, 1);
  assert.ok(Math.abs(boxes[0]!.score - 0.9) < 1e-6);
  // Pixels 30..69 x 20..27: 39 x 7 grows by 39 * 7 * 2 / 92 = 5.93 per side to
  // 24.07..74.93 x 14.07..32.93, doubled and rounded.
  assert.deepEqual(boxes[0]!.quad, [[48, 28], [150, 28], [150, 66], [48, 66]]);
  const rec = recognitionInput([{ width: 10, height: 48, data: new Uint8Array(10 * 48 * 3) }]);
  assert.deepEqual(rec.dims, [1, 3, 48, 320]);
  assert.equal(rec.data[0], -1); // black
  assert.equal(rec.data[20], 0); // padding
});

Deno.test("ocr: images that are not PNG or JPEG are refused with INVALID_ARG", () => {
  for (
    const [bytes, pattern] of [
      [
        new Uint8Array([1, 2, 3, 4, 5]),
        /expected PNG or JPEG data, got 5 bytes starting 01 02 03 04/,
      ],
      [new Uint8Array(), /got 0 bytes starting \(empty\)/],
      [new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0]), /invalid PNG/],
      [new Uint8Array([0xff, 0xd8, 0xff, 0xe0, 0, 0]), /invalid JPEG/],
    ] as const
  ) {
    assert.throws(() => decodeImage(bytes), (error) => {
      assert.ok(error instanceof InferenceError);
      assert.equal(error.code, "INVALID_ARG");
      assert.match(error.message, pattern);
      return true;
    });
  }
});

const PNG_LINES = ["Hello DenoTriton", "Serving 42 models"];
const JPEG_LINES = ["Invoice No. 2026-117", "Total: 349.90 EUR"];

for (const engine of ENGINES) {
  Deno.test({
    name: `ocr: examples/ocr on the ${engine} engine with 2 Worker instances${fontMissing}`,
    ignore: !FONT && !PEERS_REQUIRED,
    async fn(t): Promise<void> {
      assert.ok(
        FONT,
        `The OCR test needs the font ${FONT_PATH}: apt-get install fonts-dejavu-core`,
      );
      await using triton = await startServer({ engine });
      await bindOcr(triton, { instances: 2 });
      const png = renderText(PNG_LINES);
      const jpeg = renderText(JPEG_LINES, { format: "jpeg" });
      const decoded = decodeImage(png);
      for (const url of [triton.urls.http!, triton.urls.grpc!]) {
        const protocol = url.split(":")[0];
        await t.step(`PNG over ${protocol}`, async () => {
          const lines = await runClient(url, png);
          assert.deepEqual(lines.map((line) => line.text), PNG_LINES);
          for (const line of lines) {
            assert.ok(line.score > 0.9, `${line.text}: score ${line.score}`);
            for (const [x, y] of line.box) {
              assert.ok(x >= 0 && x < decoded.width && y >= 0 && y < decoded.height);
            }
          }
          // Reading order: the first line's box lies above the second's.
          assert.ok(lines[0]!.box[3][1] <= lines[1]!.box[0][1] + 4);
        });
        await t.step(`JPEG, four at once over ${protocol}`, async () => {
          const all = await Promise.all([1, 2, 3, 4].map(() => runClient(url, jpeg)));
          for (const lines of all) assert.deepEqual(lines.map((line) => line.text), JPEG_LINES);
        });
        await t.step(`a blank image reads as no lines over ${protocol}`, async () => {
          const blank = renderText([""]);
          assert.deepEqual(await runClient(url, blank), []);
        });
        await t.step(`bytes that are no image get a clear error over ${protocol}`, async () => {
          await assert.rejects(
            runClient(url, new TextEncoder().encode("not an image")),
            (error) => {
              assert.ok(error instanceof ClientInferenceServerError, String(error));
              assert.equal(error.status, protocol === "http" ? 400 : 3);
              assert.match(
                error.message,
                /Cannot decode image: expected PNG or JPEG data, got 12 bytes starting 6e 6f 74 20/,
              );
              return true;
            },
          );
        });
      }
      const ready = await fetch(`${triton.urls.http}/v2/models/${OCR_MODEL}/ready`);
      await ready.body?.cancel();
      assert.equal(ready.status, 200, "the model still serves after the bad request");
    },
  });
}

for (const engine of ENGINES) {
  Deno.test({
    name:
      `ocr: the split pipeline, as a callable and as an ensemble, reads what OCR reads [${engine}]${fontMissing}`,
    ignore: !FONT && !PEERS_REQUIRED,
    async fn(t): Promise<void> {
      assert.ok(
        FONT,
        `The OCR test needs the font ${FONT_PATH}: apt-get install fonts-dejavu-core`,
      );
      await using triton = await startServer({ engine });
      // One thread per session: three models' Workers share the test host's cores.
      await bindOcr(triton, { instances: 1, threads: 1 });
      await bindOcrPipelines(triton, { instances: 1, threads: 1 });
      const png = renderText(PNG_LINES);
      const single = await runClient(triton.urls.http!, png, OCR_MODEL);
      assert.deepEqual(single.map((line) => line.text), PNG_LINES);
      for (const form of [OCR_PIPELINE, OCR_ENSEMBLE]) {
        for (const url of [triton.urls.http!, triton.urls.grpc!]) {
          await t.step(`${form} over ${url.split(":")[0]}`, async () => {
            // The same computation split in two: the same texts, scores and boxes.
            assert.deepEqual(await runClient(url, png, form), single);
          });
        }
      }
      await t.step("a failing step names the ensemble and the step's model", async () => {
        await assert.rejects(
          runClient(triton.urls.http!, new TextEncoder().encode("not an image"), OCR_ENSEMBLE),
          (error) => {
            assert.ok(error instanceof ClientInferenceServerError, String(error));
            assert.equal(error.status, 400);
            assert.match(
              error.message,
              /in ensemble 'OcrEnsemble', model 'OcrDetect' failed: Cannot decode image: expected PNG or JPEG data, got 12 bytes starting 6e 6f 74 20/,
            );
            return true;
          },
        );
      });
      await t.step("the callable's calls went through the split models' schedulers", async () => {
        const stats = await (await fetch(`${triton.urls.http}/v2/models/stats`)).json();
        const counts = Object.fromEntries(
          (stats.model_stats as { name: string; inference_count: number }[]).map((
            { name, inference_count },
          ) => [name, inference_count]),
        );
        // Each split model: 2 pipeline calls and 2 ensemble steps (the bad image failed, and
        // inference_count counts successes).
        assert.deepEqual(counts, {
          OCR: 1,
          OcrDetect: 4,
          OcrRecognize: 4,
          OcrPipeline: 2,
          OcrEnsemble: 2,
        });
      });
    },
  });
}
