// Colour rules of the access view (pure functions, no DOM). The Python snapshot renderer
// (mlc_lab/widgets/access/view.py: COLORS, heatmap_rgb) follows the same rules.

import type { AccessViewTraits } from "../lib/model";

export type RGB = [number, number, number];

export const PALETTE = {
  empty: [236, 238, 241] as RGB,
  read: [33, 113, 181] as RGB,
  write: [214, 96, 24] as RGB,
  both: [128, 60, 170] as RGB,
};

/** What an untouched element is drawn in on a dark theme (PALETTE.empty is the light theme's): the
 *  light grey made every heatmap a white box on JupyterLab Dark. */
export const EMPTY_DARK: RGB = [46, 50, 57];

/** The colour of untouched elements on a light or a dark page. */
export function emptyColor(dark: boolean): RGB {
  return dark ? EMPTY_DARK : PALETTE.empty;
}

/** Element kinds as decoded from the masks: bit 0 read, bit 1 written. */
export const NONE = 0;
export const READ = 1;
export const WRITE = 2;
export const BOTH = 3;

/** Brightness of elements touched long before the scrubber (the end of the trail). */
export const VISITED_LEVEL = 0.45;
/** Brightness of elements the loop has not reached yet (a ghost of the whole footprint). */
export const FUTURE_LEVEL = 0.12;
/** Brightness of elements outside the picked warp or block. */
export const OUTSIDE_LEVEL = 0.18;

export type ColorBy = AccessViewTraits["color_by"];

export function kindColor(kind: number): RGB {
  return kind === BOTH ? PALETTE.both : kind === WRITE ? PALETTE.write : kind === READ ? PALETTE.read : PALETTE.empty;
}

/** `a` moved towards `b` by `f` (0: a, 1: b). */
export function mix(a: RGB, b: RGB, f: number): RGB {
  return [Math.round(a[0] + (b[0] - a[0]) * f), Math.round(a[1] + (b[1] - a[1]) * f), Math.round(a[2] + (b[2] - a[2]) * f)];
}

/** Distinct colours for thread / block ids: hues spaced by the golden ratio. */
export function hueColor(id: number): RGB {
  const h = (((id * 0.61803398875) % 1) + 1) % 1;
  const s = 0.62;
  const v = 0.88;
  const f = (n: number) => {
    const k = (n + h * 6) % 6;
    return Math.round((v - v * s * Math.max(0, Math.min(k, 4 - k, 1))) * 255);
  };
  return [f(5), f(3), f(1)];
}

/** Execution order: dark purple (first) to yellow (last), as in viridis' ends. */
export function orderColor(frac: number): RGB {
  const f = Math.max(0, Math.min(1, frac));
  return mix([68, 1, 84], [253, 231, 37], f);
}

/**
 * How bright an element first touched at step `ft` is when the scrubber is at step `t`:
 * 1 at the moment of its first touch, fading linearly over `trail` steps to VISITED_LEVEL;
 * FUTURE_LEVEL before it is touched. `t < 0` shows the whole footprint (1 everywhere).
 */
export function trailLevel(ft: number, t: number, trail: number): number {
  if (t < 0) return 1;
  if (ft > t) return FUTURE_LEVEL;
  const age = t - ft;
  const len = Math.max(1, trail);
  if (age >= len) return VISITED_LEVEL;
  return VISITED_LEVEL + (1 - VISITED_LEVEL) * (1 - age / len);
}

/** Trail length in steps for a fraction of the loop's steps (at least 1). */
export function trailSteps(steps: number, fraction: number): number {
  return Math.max(1, Math.round(steps * fraction));
}

/** The colour an element is drawn in (the full rule; the canvas loop inlines it). */
export function elementColor(base: RGB, level: number, dark = false): RGB {
  return mix(emptyColor(dark), base, level);
}

/** Pack a colour for a Uint32Array view of ImageData (little-endian RGBA). */
export function packRGBA(c: RGB, alpha = 255): number {
  return ((alpha << 24) | (c[2] << 16) | (c[1] << 8) | c[0]) >>> 0;
}

export function rgbText(c: RGB): string {
  return `rgb(${c[0]}, ${c[1]}, ${c[2]})`;
}
