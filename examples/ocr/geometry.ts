/**
 * The plane geometry of text boxes: convex hull, minimum-area rectangle (what OpenCV's
 * `minAreaRect` computes), corner order and quad rasterisation.
 *
 * @module
 */

/** A point `[x, y]`. */
export type Point = [number, number];

/** Four corners: top-left, top-right, bottom-right, bottom-left. */
export type Quad = [Point, Point, Point, Point];

function cross(o: Point, a: Point, b: Point): number {
  return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]);
}

/**
 * The convex hull of points (Andrew's monotone chain), counter-clockwise in a y-up frame.
 *
 * @param points Any points (not modified).
 * @returns The hull's corners, without repeats or collinear points.
 */
export function convexHull(points: readonly Point[]): Point[] {
  const sorted = [...points].sort((a, b) => a[0] - b[0] || a[1] - b[1])
    .filter((p, i, all) => i === 0 || p[0] !== all[i - 1]![0] || p[1] !== all[i - 1]![1]);
  if (sorted.length < 3) return sorted;
  const lower: Point[] = [];
  for (const p of sorted) {
    while (lower.length >= 2 && cross(lower.at(-2)!, lower.at(-1)!, p) <= 0) lower.pop();
    lower.push(p);
  }
  const upper: Point[] = [];
  for (let i = sorted.length - 1; i >= 0; i--) {
    const p = sorted[i]!;
    while (upper.length >= 2 && cross(upper.at(-2)!, upper.at(-1)!, p) <= 0) upper.pop();
    upper.push(p);
  }
  return lower.slice(0, -1).concat(upper.slice(0, -1));
}

/** A rotated rectangle: centre, side lengths along its axes, and the unit axis of `width`. */
export interface RotatedRect {
  /** Centre. */
  center: Point;
  /** Side along `axis`. */
  width: number;
  /** Side across `axis`. */
  height: number;
  /** Unit vector of the `width` side. */
  axis: Point;
}

/**
 * The smallest-area rectangle around points: one of its sides lies on a hull edge, so each edge
 * direction is tried (rotating calipers, done plainly: hulls of text components are small).
 *
 * @param points At least one point.
 * @returns The rectangle (zero-sized for a single point).
 */
export function minAreaRect(points: readonly Point[]): RotatedRect {
  const hull = convexHull(points);
  if (hull.length === 1) return { center: [...hull[0]!], width: 0, height: 0, axis: [1, 0] };
  let best: RotatedRect | undefined;
  let bestArea = Infinity;
  for (let i = 0; i < hull.length; i++) {
    const a = hull[i]!;
    const b = hull[(i + 1) % hull.length]!;
    const length = Math.hypot(b[0] - a[0], b[1] - a[1]);
    if (length === 0) continue;
    const ux = (b[0] - a[0]) / length;
    const uy = (b[1] - a[1]) / length;
    let minU = Infinity;
    let maxU = -Infinity;
    let minV = Infinity;
    let maxV = -Infinity;
    for (const p of hull) {
      const u = p[0] * ux + p[1] * uy;
      const v = -p[0] * uy + p[1] * ux;
      minU = Math.min(minU, u);
      maxU = Math.max(maxU, u);
      minV = Math.min(minV, v);
      maxV = Math.max(maxV, v);
    }
    const area = (maxU - minU) * (maxV - minV);
    if (area < bestArea - 1e-9) {
      bestArea = area;
      const cu = (minU + maxU) / 2;
      const cv = (minV + maxV) / 2;
      best = {
        center: [cu * ux - cv * uy, cu * uy + cv * ux],
        width: maxU - minU,
        height: maxV - minV,
        axis: [ux, uy],
      };
    }
  }
  return best!;
}

/**
 * The rectangle's corners in PaddleOCR's order (`get_mini_boxes`): of the two leftmost corners
 * the upper one is top-left, the other bottom-left; of the two rightmost the upper one is
 * top-right.
 *
 * @param rect The rectangle.
 * @returns Top-left, top-right, bottom-right, bottom-left (image coordinates, y down).
 */
export function rectCorners(rect: RotatedRect): Quad {
  const [cx, cy] = rect.center;
  const [ux, uy] = rect.axis;
  const hw = rect.width / 2;
  const hh = rect.height / 2;
  const corners: Point[] = [[-1, -1], [1, -1], [1, 1], [-1, 1]].map(([su, sv]) => [
    cx + su! * hw * ux - sv! * hh * uy,
    cy + su! * hw * uy + sv! * hh * ux,
  ]);
  corners.sort((a, b) => a[0] - b[0]);
  const [l1, l2, r1, r2] = corners as Quad;
  const [topLeft, bottomLeft] = l1[1] <= l2[1] ? [l1, l2] : [l2, l1];
  const [topRight, bottomRight] = r1[1] <= r2[1] ? [r1, r2] : [r2, r1];
  return [topLeft, topRight, bottomRight, bottomLeft];
}

/**
 * Grows a rectangle by `distance` on every side: what a rounded polygon offset (PaddleOCR's
 * `unclip` with pyclipper) followed by a minimum-area rectangle gives for a rectangle.
 *
 * @param rect The rectangle.
 * @param ratio PaddleOCR's `unclip_ratio`: the offset is `area * ratio / perimeter`.
 * @returns The grown rectangle.
 */
export function unclip(rect: RotatedRect, ratio: number): RotatedRect {
  const perimeter = 2 * (rect.width + rect.height);
  const distance = perimeter === 0 ? 0 : rect.width * rect.height * ratio / perimeter;
  return { ...rect, width: rect.width + 2 * distance, height: rect.height + 2 * distance };
}

/**
 * Calls `visit` for every integer pixel inside a convex quad (edges included), within
 * `[0, width) x [0, height)`.
 *
 * @param quad The corners, in order around the quad.
 * @param width Raster width.
 * @param height Raster height.
 * @param visit Called with each pixel's x and y.
 */
export function forEachPixelInQuad(
  quad: Quad,
  width: number,
  height: number,
  visit: (x: number, y: number) => void,
): void {
  const xs = quad.map((p) => p[0]);
  const ys = quad.map((p) => p[1]);
  const x0 = Math.max(0, Math.floor(Math.min(...xs)));
  const x1 = Math.min(width - 1, Math.ceil(Math.max(...xs)));
  const y0 = Math.max(0, Math.floor(Math.min(...ys)));
  const y1 = Math.min(height - 1, Math.ceil(Math.max(...ys)));
  // Inside a convex polygon every edge's cross product has the same sign (or is ~0 on an edge).
  const sign = Math.sign(cross(quad[0], quad[1], quad[2])) || 1;
  for (let y = y0; y <= y1; y++) {
    for (let x = x0; x <= x1; x++) {
      let inside = true;
      for (let i = 0; i < 4 && inside; i++) {
        inside = sign * cross(quad[i]!, quad[(i + 1) % 4]!, [x, y]) >= -1e-6;
      }
      if (inside) visit(x, y);
    }
  }
}
