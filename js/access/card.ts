// One buffer's heatmap card of the access panel: sizing its canvas to a slice, the minimap, the
// statistics table, and painting a frame (the touched pixels, gathered once per slice and focus).

import { h } from "../lib/dom";
import { FUTURE_LEVEL, OUTSIDE_LEVEL, type RGB, VISITED_LEVEL, emptyColor, trailSteps } from "./color";
import { isDarkTheme } from "../lib/theme";

/** Untouched elements' colour on the page the card is drawn in (light or dark theme). */
export const emptyOf = (card: { canvas: HTMLCanvasElement }): RGB => emptyColor(isDarkTheme(card.canvas.ownerDocument ?? document));
import { type DecodedBuffer, type Footprint, READABLE_CELL_PX, type SliceMap, sliceMap } from "./data";

export interface Card {
  buf: DecodedBuffer;
  el: HTMLElement;
  canvas: HTMLCanvasElement;
  ctx: CanvasRenderingContext2D | null;
  img: ImageData | null;
  u32: Uint32Array | null;
  slice: SliceMap;
  lead: number[];
  base: Uint32Array; // per crop element: packed base colour (r | g << 8 | b << 16)
  gathered: Gathered | null; // the touched pixels of the current slice (null: gather again)
  fresh: boolean; // the canvas has not shown this slice yet
  grid: HTMLElement; // element borders over the canvas (when cells are large)
  mini: HTMLCanvasElement; // the whole slice, small, with the shown box outlined (when zoomed)
  miniBox: HTMLElement;
  range: HTMLElement; // which rows and columns are shown, when not the whole buffer
}

interface Gathered {
  pos: Int32Array;
  first: Float64Array;
  base: Uint32Array;
  minFt: number;
  maxFt: number;
  box: [number, number, number, number]; // x, y, w, h of the touched pixels (the dirty rectangle)
  lastKey: string | null; // what the last frame drew (skip frames that change nothing)
}

export const MAX_1D_PX = 640;
const MINI_PX = 96;
/** A strip (a 1×128 row, a 128×4 band) is at least this many CSS px across: its cells stretch
 * along the short side instead of drawing a 2 px line. */
const MIN_STRIP_PX = 28;

/** Size a card's canvas for the slice `s` (longest side `maxSide` CSS px), with its borders, range and minimap. */
export function resizeCard(card: Card, s: SliceMap, maxSide: number): void {
  card.slice = s;
  const c = card.canvas;
  c.width = s.cols;
  c.height = s.rows;
  let pw: number; // CSS pixels per canvas pixel, across and down (equal unless the slice is a strip)
  let ph: number;
  if (card.buf.shape.length <= 1) {
    pw = Math.max(1, Math.min(16, MAX_1D_PX / s.cols));
    ph = Math.max(18, Math.min(pw, 24));
    c.style.width = `${Math.round(s.cols * pw)}px`;
    c.style.height = `${ph}px`;
  } else {
    const fit = maxSide / Math.max(s.rows, s.cols);
    // whole (or half) screen pixels per element when they fit, so cells stay even
    const px = fit >= 2 ? Math.min(24, Math.floor(fit)) : fit >= 1 ? Math.floor(fit * 2) / 2 : fit;
    pw = s.cols * px < MIN_STRIP_PX ? Math.min(24, MIN_STRIP_PX / s.cols) : px;
    ph = s.rows * px < MIN_STRIP_PX ? Math.min(24, MIN_STRIP_PX / s.rows) : px;
    c.style.width = `${Math.max(1, Math.round(s.cols * pw))}px`;
    c.style.height = `${Math.max(1, Math.round(s.rows * ph))}px`;
  }
  // Element borders once a cell is large enough to read one (never on pooled pixels).
  const borders = s.f === 1 && Math.min(pw, ph) >= READABLE_CELL_PX;
  card.grid.hidden = !borders;
  card.el.classList.toggle("mlc-acc-cells", borders);
  if (borders) card.grid.style.backgroundSize = `${pw}px ${ph}px`;
  card.el.classList.toggle("mlc-acc-zoomed", !s.whole);
  const span = (lo: number, n: number) => (n <= 1 ? `${lo}` : `${lo}–${lo + n - 1}`);
  const nd = card.buf.shape.length;
  const lastRow = Math.min(s.rows * s.f, (nd >= 2 ? card.buf.shape[nd - 2] : 1) - s.r0);
  const lastCol = Math.min(s.cols * s.f, card.buf.shape[nd - 1] - s.c0);
  card.range.textContent = s.whole
    ? s.f > 1 ? `one pixel: ${s.f}×${nd >= 2 ? s.f : 1} elements` : ""
    : `${nd >= 2 ? `rows ${span(s.r0, lastRow)} × ` : ""}${nd >= 1 ? `${nd >= 2 ? "cols " : "elements "}${span(s.c0, lastCol)}` : ""}${s.f > 1 ? ` (one pixel: ${s.f}×${nd >= 2 ? s.f : 1})` : ""}`;
  card.el.dataset.view = `${s.r0},${s.c0},${s.rows * s.f},${s.cols * s.f},${s.f}`;
  drawMini(card);
  card.ctx = c.getContext?.("2d") ?? null;
  card.img = card.ctx ? card.ctx.createImageData(s.cols, s.rows) : null;
  card.u32 = card.img ? new Uint32Array(card.img.data.buffer) : new Uint32Array(s.rows * s.cols);
  card.gathered = null;
}

/**
 * The minimap: the whole 2-D slice in at most MINI_PX pixels, touched elements dark, and the box
 * the heatmap shows outlined. Only while zoomed in.
 */
export function drawMini(card: Card): void {
  const s = card.slice;
  const host = card.mini.parentElement as HTMLElement | null;
  if (host) host.hidden = s.whole;
  if (s.whole) return;
  const buf = card.buf;
  const whole = sliceMap(buf.shape, buf.crop, card.lead, "buffer", { maxPx: MINI_PX, kind: buf.kind, first: buf.first });
  const m = card.mini;
  m.width = whole.cols;
  m.height = whole.rows;
  const scale = Math.min(MINI_PX / whole.cols, (buf.shape.length <= 1 ? 12 : MINI_PX) / whole.rows);
  m.style.width = `${Math.max(1, Math.round(whole.cols * scale))}px`;
  m.style.height = `${Math.max(1, Math.round(whole.rows * scale))}px`;
  const ctx = m.getContext?.("2d");
  if (ctx) {
    const img = ctx.createImageData(whole.cols, whole.rows);
    const u32 = new Uint32Array(img.data.buffer);
    const [er, eg, eb] = emptyOf(card);
    const [tr, tg, tb] = [90, 90, 100];
    for (let p = 0; p < whole.map.length; p++) {
      const hit = whole.map[p] >= 0;
      u32[p] = ((0xff << 24) | ((hit ? tb : eb) << 16) | ((hit ? tg : eg) << 8) | (hit ? tr : er)) >>> 0;
    }
    ctx.putImageData(img, 0, 0);
  }
  // the shown box, in minimap CSS pixels
  const k = scale / whole.f;
  Object.assign(card.miniBox.style, {
    left: `${Math.floor(s.c0 * k)}px`,
    top: `${Math.floor(s.r0 * k)}px`,
    width: `${Math.max(2, Math.ceil(s.cols * s.f * k))}px`,
    height: `${Math.max(2, Math.ceil((buf.shape.length <= 1 ? whole.rows : s.rows * s.f) * k))}px`,
  });
}

/** A buffer's numbers under its heatmap: distinct elements, accesses, cache lines, reuse, bounds, strides. */
export function statsTable(b: DecodedBuffer, fp: Footprint): HTMLElement {
  const row = (k: string, v: Node | string, title = "") => h("tr", { title }, h("th", {}, k), h("td", {}, v));
  const bounds = b.bounds.length && b.bounds.every((x) => x) ? b.bounds.map((x) => `[${x![0]}, ${x![1]}]`).join(" × ") : "–";
  const enclosing = new Set(fp.enclosing.map((l) => l.name));
  const strides = h(
    "span",
    { class: "mlc-acc-strides" },
    ...Object.entries(b.strides).map(([loop, s]) =>
      h("span", { class: `mlc-acc-stride${loop === fp.loop.name ? " mlc-acc-stride-self" : enclosing.has(loop) ? " mlc-acc-stride-outer" : ""}`, title: loop === fp.loop.name ? "the selected loop" : enclosing.has(loop) ? "an enclosing loop" : "an inner loop" }, `${loop}: ${s === null ? "–" : s}`),
    ),
  );
  return h(
    "table",
    { class: "mlc-acc-stats" },
    row("distinct", b.distinct.toLocaleString(), "distinct elements touched"),
    row("accesses", `${b.accesses.toLocaleString()} (${b.n_reads.toLocaleString()} R, ${b.n_writes.toLocaleString()} W)`),
    row("cache lines", b.cache_lines.toLocaleString(), "distinct 64-byte cache lines"),
    row("reuse", `${b.reuse.toFixed(2)}×`, "accesses per distinct element"),
    row("bounds", bounds),
    row("strides", Object.keys(b.strides).length ? strides : "–", "elements moved per step of each loop"),
  );
}

/**
 * The touched pixels of a slice, gathered once per slice / colour mode / focus: their positions,
 * first-touch steps and base colours (bit 24: outside the picked warp or block). Untouched pixels
 * never change, so a frame only visits these.
 */
function gather(card: Card, warp: number, blk: number): Gathered {
  if (card.gathered) return card.gathered;
  const { map } = card.slice;
  const b = card.buf;
  const thread = warp >= 0 ? b.thread : null;
  const block = blk >= 0 ? b.block : null;
  let n = 0;
  for (let p = 0; p < map.length; p++) if (map[p] >= 0 && b.kind[map[p]]) n++;
  const pos = new Int32Array(n);
  const first = new Float64Array(n);
  const base = new Uint32Array(n);
  let minFt = Infinity;
  let maxFt = -Infinity;
  let k = 0;
  const cols = card.slice.cols;
  let x0 = Infinity;
  let y0 = Infinity;
  let x1 = -1;
  let y1 = -1;
  for (let p = 0; p < map.length; p++) {
    const i = map[p];
    if (i < 0 || !b.kind[i]) continue;
    pos[k] = p;
    const x = p % cols;
    const y = (p - x) / cols;
    if (x < x0) x0 = x;
    if (x > x1) x1 = x;
    if (y < y0) y0 = y;
    if (y > y1) y1 = y;
    const ft = b.first[i];
    first[k] = ft;
    if (ft < minFt) minFt = ft;
    if (ft > maxFt) maxFt = ft;
    const outside = (thread && thread[i] >> 5 !== warp) || (block && block[i] !== blk);
    base[k++] = (card.base[i] & 0xffffff) | (outside ? 1 << 24 : 0);
  }
  const box: [number, number, number, number] = n ? [x0, y0, x1 - x0 + 1, y1 - y0 + 1] : [0, 0, 0, 0];
  card.gathered = { pos, first, base, minFt, maxFt, box, lastKey: null };
  card.fresh = true; // the whole image must be put once
  // untouched pixels, once
  const [er, eg, eb] = emptyOf(card);
  if (card.u32) card.u32.fill(((0xff << 24) | (eb << 16) | (eg << 8) | er) >>> 0);
  return card.gathered;
}

/** One frame of one heatmap: base colour scaled by trail level (and focus) per touched pixel. */
export function paint(card: Card, steps: number, state: { time: number; warp: number; block: number }, trailFrac: number): void {
  if (!card.u32) return;
  const g = gather(card, state.warp, state.block);
  const t = state.time;
  const trail = trailFrac > 0 ? trailSteps(steps, trailFrac) : 1;
  // A frame where every pixel of this card is in the same phase as last time changes nothing.
  const phase = t < 0 ? "all" : t < g.minFt ? "future" : t - trail >= g.maxFt ? "visited" : `t${t}`;
  const key = `${phase}:${trail}`;
  if (key === g.lastKey) return;
  g.lastKey = key;
  const u32 = card.u32;
  const [er, eg, eb] = emptyOf(card);
  const { pos, first, base } = g;
  const span = 1 - VISITED_LEVEL;
  for (let k = 0; k < pos.length; k++) {
    let level = 1;
    if (t >= 0) {
      const ft = first[k];
      if (ft > t) level = FUTURE_LEVEL;
      else {
        const age = t - ft;
        level = age >= trail ? VISITED_LEVEL : VISITED_LEVEL + span * (1 - age / trail);
      }
    }
    const c = base[k];
    if (c & (1 << 24) && level > OUTSIDE_LEVEL) level = OUTSIDE_LEVEL;
    const r = (er + ((c & 255) - er) * level + 0.5) | 0;
    const gr = (eg + (((c >> 8) & 255) - eg) * level + 0.5) | 0;
    const bl = (eb + (((c >> 16) & 255) - eb) * level + 0.5) | 0;
    u32[pos[k]] = ((0xff << 24) | ((bl & 255) << 16) | ((gr & 255) << 8) | (r & 255)) >>> 0;
  }
  if (card.ctx && card.img) {
    if (card.fresh) card.ctx.putImageData(card.img, 0, 0);
    else if (g.box[2] > 0) card.ctx.putImageData(card.img, 0, 0, ...g.box);
    card.fresh = false;
  }
}

/** The elements one pixel of a heatmap stands for, rows × columns: the drawing's pooling (a box larger
 *  than the picture) or the data's own (a crop sent pooled), whichever is coarser. */
export function pixelBlock(card: Pick<Card, "buf" | "slice">): [number, number] {
  const pool = card.buf.crop.pool ?? [];
  const nd = card.buf.shape.length;
  const rows = nd >= 2 ? Math.max(card.slice.f, pool[nd - 2] ?? 1) : 1;
  const cols = nd >= 1 ? Math.max(card.slice.f, pool[nd - 1] ?? 1) : 1;
  return [rows, cols];
}

export const blockText = ([rows, cols]: [number, number]): string => (rows > 1 ? `${rows}×${cols}` : String(cols));
