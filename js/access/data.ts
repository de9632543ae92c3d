// The footprint payload (JSON + binary buffers) and what the heatmaps need from it. Pure functions:
// decoding typed arrays, bit masks, N-D -> 2-D slicing, element look-up. Python side:
// mlc_lab/widgets/access/view.py (footprint_payload).

// The payload's types are generated from mlc_lab/model/access/payload.py (js/lib/model.ts).
import type { AccessViewTraits, ArrayDescr, BufferPayload, FootprintResult } from "../lib/model";

export type { ArrayDescr, BufferPayload, BufferStats, EnclosingLoop, FootprintResult, LoopInfo } from "../lib/model";

type NumArray = Int8Array | Int16Array | Int32Array | Uint8Array | Uint16Array | Uint32Array | Float64Array;

/** One buffer, decoded: per element of the crop box its kind (bit 0 read, bit 1 write) and arrays. */
export interface DecodedBuffer extends BufferPayload {
  size: number; // elements in the crop box
  kind: Uint8Array;
  first: NumArray;
  count: NumArray | null;
  thread: NumArray | null;
  block: NumArray | null;
}

export interface Footprint extends Omit<FootprintResult, "buffers"> {
  buffers: DecodedBuffer[];
}

function bytesOf(view: DataView | ArrayBuffer | Uint8Array): Uint8Array {
  if (view instanceof Uint8Array) return view;
  if (view instanceof ArrayBuffer) return new Uint8Array(view);
  return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}

async function inflate(data: Uint8Array): Promise<Uint8Array> {
  const DS = (globalThis as any).DecompressionStream;
  if (!DS) throw new Error("this browser cannot inflate the footprint (no DecompressionStream)");
  const input = new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(data);
      c.close();
    },
  });
  const reader = (input.pipeThrough(new DS("deflate")) as ReadableStream<Uint8Array>).getReader();
  const parts: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
    total += value.length;
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

const ARRAY_TYPES: Record<string, new (buf: ArrayBuffer) => NumArray> = {
  int8: Int8Array,
  int16: Int16Array,
  int32: Int32Array,
  uint8: Uint8Array,
  uint16: Uint16Array,
  uint32: Uint32Array,
  float64: Float64Array,
};

/** A typed array over a copy of `bytes` (copied: Python's buffers need not be aligned). */
export function typedArray(bytes: Uint8Array, dtype: string): NumArray {
  if (!Object.hasOwn(ARRAY_TYPES, dtype)) throw new Error(`unknown array type ${dtype}`);
  return new ARRAY_TYPES[dtype](bytes.slice().buffer);
}

/** Bit `i` of a big-endian packed mask (numpy's packbits). */
export function bit(mask: Uint8Array, i: number): number {
  return (mask[i >> 3] >> (7 - (i & 7))) & 1;
}

/** Per element: 1 read, 2 written, 3 both, 0 untouched. */
export function kindsFromMasks(reads: Uint8Array, writes: Uint8Array, size: number): Uint8Array {
  const out = new Uint8Array(size);
  for (let i = 0; i < size; i++) out[i] = bit(reads, i) | (bit(writes, i) << 1);
  return out;
}

export async function decodeFootprint(result: FootprintResult, buffers: Array<DataView | ArrayBuffer | Uint8Array>): Promise<Footprint> {
  const raw = async (d: ArrayDescr | undefined): Promise<Uint8Array | null> => {
    if (!d) return null;
    const b = buffers[d.buffer];
    if (!b) throw new Error(`footprint buffer #${d.buffer} is missing`);
    const bytes = bytesOf(b);
    return d.enc === "deflate" ? inflate(bytes) : bytes;
  };
  const out: DecodedBuffer[] = [];
  for (const b of result.buffers) {
    const size = b.crop.shape.reduce((a, x) => a * x, 1);
    const a = b.arrays;
    if (!a.first_touch || !b.distinct) {
      out.push({ ...b, size: 0, kind: new Uint8Array(0), first: new Int32Array(0), count: null, thread: null, block: null });
      continue;
    }
    const [reads, writes, first, count, thread, block] = await Promise.all([a.reads, a.writes, a.first_touch, a.count, a.thread, a.block].map(raw));
    out.push({
      ...b,
      size,
      kind: kindsFromMasks(reads ?? new Uint8Array(0), writes ?? new Uint8Array(0), size),
      first: typedArray(first!, a.first_touch.dtype),
      count: count && a.count ? typedArray(count, a.count.dtype) : null,
      thread: thread && a.thread ? typedArray(thread, a.thread.dtype) : null,
      block: block && a.block ? typedArray(block, a.block.dtype) : null,
    });
  }
  return { ...result, buffers: out };
}

// ---- N-D -> 2-D ---------------------------------------------------------------------------------

/** How a buffer is laid out on screen: 1-D a strip, 2-D a grid, more dims a grid per leading index. */
export interface Grid {
  rows: number;
  cols: number;
  lead: number[]; // sizes of the leading dims (sliders)
}

export function gridOf(shape: number[]): Grid {
  if (shape.length === 0) return { rows: 1, cols: 1, lead: [] };
  if (shape.length === 1) return { rows: 1, cols: shape[0], lead: [] };
  return { rows: shape[shape.length - 2], cols: shape[shape.length - 1], lead: shape.slice(0, -2) };
}

/** What a heatmap shows: the whole buffer, the box of touched elements, or (auto) that box with
 * context around it when the whole buffer would show the touched part as a few pixels. */
export type Region = AccessViewTraits["region"];

/** The rows and columns of a 2-D slice that a heatmap shows (buffer coordinates). */
export interface ViewBox {
  r0: number;
  c0: number;
  rows: number;
  cols: number;
}

export interface SliceMap extends ViewBox {
  f: number; // elements per pixel side (1: one pixel per element; more: pooled)
  whole: boolean; // the box is the whole 2-D slice
  map: Int32Array; // per pixel: index into the crop arrays, -1 outside the crop (or untouched when pooled)
}

export interface SliceOptions {
  maxPx?: number; // pixels the longest side may take on screen (pooling beyond it; "auto" zoom)
  kind?: Uint8Array; // per crop element: touched bits (pooling picks a touched element)
  first?: ArrayLike<number>; // per crop element: first touch (pooling picks the earliest)
}

/** Smallest cell, in CSS pixels, at which the whole buffer is still readable without zooming. */
export const READABLE_CELL_PX = 6;

/** The box a heatmap shows for `region` (see Region). */
/** The crop box's arrays: `pool[d]` buffer elements per array element (a crop too large to draw
 *  whole comes pooled: each element stands for a block, by its earliest touch). */
export interface CropBox {
  offset: number[];
  shape: number[];
  pool?: number[];
}

/** The crop box's extent in buffer elements per dimension. */
function cropExtent(crop: CropBox): number[] {
  return crop.shape.map((n, d) => n * (crop.pool?.[d] ?? 1));
}

export function viewBox(shape: number[], crop: CropBox, region: Region, maxPx = 280): ViewBox {
  const nd = shape.length;
  const g = gridOf(shape);
  const whole: ViewBox = { r0: 0, c0: 0, rows: g.rows, cols: g.cols };
  const cs = cropExtent(crop);
  if (region === "buffer" || nd === 0 || cs.length !== nd || cs.some((x) => x <= 0)) return whole;
  const rd = nd >= 2 ? nd - 2 : -1;
  const cd = nd - 1;
  const touched: ViewBox = { r0: rd >= 0 ? crop.offset[rd] : 0, c0: crop.offset[cd], rows: rd >= 0 ? cs[rd] : 1, cols: cs[cd] };
  if (region === "touched") return touched;
  // auto: the whole buffer when it is readable as it is, or when the touched box is most of it
  if (Math.max(g.rows, g.cols) * READABLE_CELL_PX <= maxPx) return whole;
  const widen = (lo: number, n: number, size: number): [number, number] => {
    const m = Math.max(2, Math.ceil(n / 2)); // context: half the touched extent each side
    const a = Math.max(0, lo - m);
    const b = Math.min(size, lo + n + m);
    return [a, b - a];
  };
  const [r0, rows] = rd >= 0 ? widen(touched.r0, touched.rows, g.rows) : [0, 1];
  const [c0, cols] = widen(touched.c0, touched.cols, g.cols);
  if (rows * cols >= 0.5 * g.rows * g.cols) return whole;
  return { r0, c0, rows, cols };
}

/**
 * Pixels of one 2-D slice (the leading dims at `lead`) mapped to elements of the crop box, for the
 * box `region` selects. When the box has more elements per side than `maxPx`, one pixel stands for
 * an f x f block and shows its earliest-touched element, so that sparse touches never vanish in
 * the scaling (a 1024 x 1024 buffer on 280 pixels kept one element in 13).
 */
export function sliceMap(shape: number[], crop: CropBox, lead: number[], region: Region = "buffer", opts: SliceOptions = {}): SliceMap {
  const nd = shape.length;
  const g = gridOf(shape);
  const box = viewBox(shape, crop, region, opts.maxPx);
  const whole = box.r0 === 0 && box.c0 === 0 && box.rows === g.rows && box.cols === g.cols;
  const longest = Math.max(box.rows, box.cols);
  const f = opts.maxPx && opts.kind && longest > opts.maxPx ? Math.ceil(longest / opts.maxPx) : 1;
  const rows = Math.ceil(box.rows / f);
  const cols = Math.ceil(box.cols / f);
  const out: SliceMap = { ...box, rows, cols, f, whole, map: new Int32Array(rows * cols).fill(-1) };
  const off = crop.offset;
  const cs = crop.shape;
  if (cs.length !== nd || cs.some((x) => x <= 0)) return out;
  // linear offset of the leading indices inside the crop box
  let base = 0;
  for (let d = 0; d < nd - 2; d++) {
    const x = (lead[d] ?? 0) - off[d];
    if (x < 0 || x >= cs[d]) return out;
    base = base * cs[d] + x;
  }
  const rd = nd >= 2 ? nd - 2 : -1;
  const cd = nd >= 1 ? nd - 1 : -1;
  const crows = rd >= 0 ? cs[rd] : 1;
  const ccols = cd >= 0 ? cs[cd] : 1;
  const orow = rd >= 0 ? off[rd] : 0;
  const ocol = cd >= 0 ? off[cd] : 0;
  const pr = rd >= 0 ? crop.pool?.[rd] ?? 1 : 1; // buffer rows per crop row (a pooled crop)
  const pc = cd >= 0 ? crop.pool?.[cd] ?? 1 : 1;
  const map = out.map;
  if (f === 1) {
    for (let r = 0; r < rows; r++) {
      const cr = Math.floor((r + box.r0 - orow) / pr);
      if (cr < 0 || cr >= crows) continue;
      const rowBase = (base * crows + cr) * ccols;
      for (let c = 0; c < cols; c++) {
        const cc = Math.floor((c + box.c0 - ocol) / pc);
        if (cc < 0 || cc >= ccols) continue;
        map[r * cols + c] = rowBase + cc;
      }
    }
    return out;
  }
  // pooled: visit the crop elements inside the box once, keep the earliest touched per pixel
  const kind = opts.kind!;
  const first = opts.first;
  const best = new Float64Array(rows * cols).fill(Infinity);
  const rLo = Math.max(0, Math.floor((box.r0 - orow) / pr));
  const rHi = Math.min(crows, Math.ceil((box.r0 + box.rows - orow) / pr));
  const cLo = Math.max(0, Math.floor((box.c0 - ocol) / pc));
  const cHi = Math.min(ccols, Math.ceil((box.c0 + box.cols - ocol) / pc));
  for (let cr = rLo; cr < rHi; cr++) {
    const pixRow = Math.min(rows - 1, Math.max(0, Math.floor((cr * pr + orow - box.r0) / f)));
    const rowBase = (base * crows + cr) * ccols;
    for (let cc = cLo; cc < cHi; cc++) {
      const i = rowBase + cc;
      if (!kind[i]) continue;
      const p = pixRow * cols + Math.min(cols - 1, Math.max(0, Math.floor((cc * pc + ocol - box.c0) / f)));
      const t = first ? first[i] : 0;
      if (t < best[p]) {
        best[p] = t;
        map[p] = i;
      }
    }
  }
  return out;
}

/** The buffer index of element `i` of the crop arrays (of a pooled crop: its block's first). */
export function cropIndex(crop: CropBox, i: number): number[] {
  const out = new Array<number>(crop.shape.length);
  let rest = i;
  for (let d = crop.shape.length - 1; d >= 0; d--) {
    out[d] = crop.offset[d] + (rest % crop.shape[d]) * (crop.pool?.[d] ?? 1);
    rest = Math.floor(rest / crop.shape[d]);
  }
  return out;
}

/** The buffer index shown at pixel (r, c) of a slice (its first element when pooled). */
export function indexAt(shape: number[], lead: number[], s: SliceMap, r: number, c: number): number[] {
  const f = s.f ?? 1;
  if (shape.length === 0) return [];
  if (shape.length === 1) return [c * f + s.c0];
  return [...lead.slice(0, shape.length - 2).map((x) => x ?? 0), r * f + s.r0, c * f + s.c0];
}

/** What the hover tells about one element. */
export function describeElement(b: DecodedBuffer, index: number[], i: number, launch: Record<string, number> = {}): string {
  const name = `${b.buffer}[${index.join(", ")}]`;
  if (i < 0 || !b.kind[i]) return `${name}: not touched`;
  const k = b.kind[i];
  const what = k === 3 ? "read and written" : k === 2 ? "written" : "read";
  const parts = [`${name}: ${what}`, `first at step ${b.first[i]}`];
  if (b.count) parts.push(`${b.count[i]} access${b.count[i] === 1 ? "" : "es"}`);
  if (b.thread && b.thread[i] >= 0) parts.push(`thread ${threadText(b.thread[i], launch, "threadIdx")}`);
  if (b.block && b.block[i] >= 0) parts.push(`block ${threadText(b.block[i], launch, "blockIdx")}`);
  return parts.join(", ");
}

/** A linear thread/block id with its (x, y, z) when the launch has more than one dimension. */
export function threadText(id: number, launch: Record<string, number>, prefix: "threadIdx" | "blockIdx"): string {
  const nx = launch[`${prefix}.x`] ?? 1;
  const ny = launch[`${prefix}.y`] ?? 1;
  const hasY = `${prefix}.y` in launch;
  const hasZ = `${prefix}.z` in launch;
  if (!hasY && !hasZ) return String(id);
  const x = id % nx;
  const y = Math.floor(id / nx) % ny;
  const z = Math.floor(id / (nx * ny));
  return `${id} (${hasZ ? `${x}, ${y}, ${z}` : `${x}, ${y}`})`;
}

/** Number of threads and blocks in the launch (product of the bound extents). */
export function launchSize(launch: Record<string, number>, prefix: "threadIdx" | "blockIdx"): number {
  return ["x", "y", "z"].reduce((a, d) => a * (launch[`${prefix}.${d}`] ?? 1), 1);
}
