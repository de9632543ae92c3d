// @vitest-environment jsdom
// The memory view made readable (issue 9): zoom to the touched part with context and a minimap,
// pooled pixels so that sparse touches of a large buffer never vanish, element borders on large
// cells, blocks picked by name.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { PALETTE } from "../access/color";
import { type FootprintResult, cropIndex, sliceMap, viewBox } from "../access/data";
import { AccessPanel } from "../access/panel";
import { px, stubCanvas } from "./fixtures";

function packbits(bits: ArrayLike<boolean | number>): Uint8Array {
  const out = new Uint8Array(Math.ceil(bits.length / 8));
  for (let i = 0; i < bits.length; i++) if (bits[i]) out[i >> 3] |= 0x80 >> (i & 7);
  return out;
}

describe("which part of a buffer is shown", () => {
  const crop = (offset: number[], shape: number[]) => ({ offset, shape });

  it("a small buffer is shown whole: every cell is readable already", () => {
    expect(viewBox([16, 16], crop([3, 4], [1, 2]), "auto", 280)).toEqual({ r0: 0, c0: 0, rows: 16, cols: 16 });
  });

  it("a small footprint in a large buffer: the touched box with half its size around it", () => {
    // j_1 of mm_relu at one i, k: 4 elements of a 128 x 128 buffer (4 pixels of 280 before)
    expect(viewBox([128, 128], crop([7, 8], [1, 4]), "auto", 280)).toEqual({ r0: 5, c0: 6, rows: 5, cols: 8 });
    expect(viewBox([128, 128], crop([7, 8], [1, 4]), "touched", 280)).toEqual({ r0: 7, c0: 8, rows: 1, cols: 4 });
    expect(viewBox([128, 128], crop([7, 8], [1, 4]), "buffer", 280)).toEqual({ r0: 0, c0: 0, rows: 128, cols: 128 });
  });

  it("a footprint over most of the buffer shows the whole buffer", () => {
    expect(viewBox([1024, 1024], crop([0, 0], [600, 1024]), "auto", 280)).toEqual({ r0: 0, c0: 0, rows: 1024, cols: 1024 });
  });

  it("1-D buffers zoom along their one axis", () => {
    expect(viewBox([1024], crop([256], [128]), "auto", 640)).toEqual({ r0: 0, c0: 192, rows: 1, cols: 256 });
  });
});

describe("pooled pixels", () => {
  it("the 1024 x 1024 GPU case: 1,024 sparse touched elements all stay visible", () => {
    // A of the shared-memory matmul at k_0: rows 0..32, every 4th column, one element each
    const shape = [1024, 1024];
    const c = { offset: [0, 0], shape: [33, 1020] };
    const n = 33 * 1020;
    const kind = new Uint8Array(n);
    const first = new Int32Array(n).fill(-1);
    let touched = 0;
    for (let t = 0; t < 1024; t++) {
      const r = t % 33;
      const col = (t * 4) % 1020;
      const i = r * 1020 + col;
      if (!kind[i]) touched++;
      kind[i] = 1;
      first[i] = t;
    }
    // the old whole-buffer view: 1024 elements on 280 pixels, one pixel in 3.7 kept
    const s = sliceMap(shape, c, [], "auto", { maxPx: 280, kind, first });
    expect(s.f).toBeGreaterThan(1);
    expect(Math.max(s.rows, s.cols)).toBeLessThanOrEqual(280);
    // every touched element lies in a pixel that shows a touched element
    for (let i = 0; i < n; i++) {
      if (!kind[i]) continue;
      const [r, col] = cropIndex(c, i);
      const p = Math.floor((r - s.r0) / s.f) * s.cols + Math.floor((col - s.c0) / s.f);
      expect(s.map[p]).toBeGreaterThanOrEqual(0);
      expect(first[s.map[p]]).toBeLessThanOrEqual(first[i]); // the earliest of its block
    }
    expect(Array.from(s.map).filter((v) => v >= 0).length).toBeGreaterThan(0);
    expect(touched).toBe(1024);
  });

  it("without pooling a pixel is an element", () => {
    const s = sliceMap([4, 5], { offset: [1, 2], shape: [2, 2] }, [], "buffer", { maxPx: 280, kind: new Uint8Array(4).fill(1) });
    expect(s.f).toBe(1);
    expect(s.rows * s.cols).toBe(20);
  });

  it("cropIndex inverts the crop layout", () => {
    expect(cropIndex({ offset: [1, 2], shape: [2, 3] }, 4)).toEqual([2, 3]);
  });
});

// ---- the panel ----------------------------------------------------------------------------------

/** A 128 x 128 buffer with 4 touched elements (a run of row 7), and a GPU launch of 2 x 2 blocks. */
function payload(): FootprintResult {
  return {
    loop: { name: "j_1", ref: "j_1", extent: 4, min: 0, thread: null, loop_kind: "serial" },
    enclosing: [],
    at: {},
    steps: 4,
    gpu: true,
    launch: { "threadIdx.x": 32, "blockIdx.x": 2, "blockIdx.y": 2 },
    buffers: [
      {
        buffer: "B", shape: [128, 128], dtype: "float32", scope: "global", itemsize: 4, distinct: 4, accesses: 4, n_reads: 4, n_writes: 0,
        reuse: 1, cache_lines: 1, bounds: [[7, 7], [8, 11]], strides: { j_1: 1 }, crop: { offset: [7, 8], shape: [1, 4] },
        arrays: {
          reads: { buffer: 0, dtype: "bits", size: 4, nbytes: 1 },
          writes: { buffer: 1, dtype: "bits", size: 4, nbytes: 1 },
          first_touch: { buffer: 2, dtype: "int32", size: 4, nbytes: 16 },
          thread: { buffer: 3, dtype: "int8", size: 4, nbytes: 4 },
          block: { buffer: 4, dtype: "int8", size: 4, nbytes: 4 },
        },
      },
    ],
  };
}

function host() {
  const calls: Array<{ method: string; params: any }> = [];
  return {
    calls,
    saved: [] as any[],
    async request(method: string, params: any = {}) {
      calls.push({ method, params });
      if (method === "access_footprint") {
        const bufs = [packbits([1, 1, 1, 1]), packbits([0, 0, 0, 0]), new Uint8Array(new Int32Array([0, 1, 2, 3]).buffer), new Uint8Array(new Int8Array([0, 1, 2, 3]).buffer), new Uint8Array(new Int8Array([3, 3, 3, 3]).buffer)];
        return { result: payload() as any, buffers: bufs.map((b) => new DataView(b.buffer)) };
      }
      return { result: { warp: 0, threads: [0, 31], launch: {}, accesses: [] } as any, buffers: [] };
    },
    saveState(s: any) {
      this.saved.push(s);
    },
  };
}

beforeEach(() => {
  stubCanvas();
});
afterEach(() => {
  vi.restoreAllMocks();
  vi.unstubAllGlobals();
});

describe("the panel zooms, outlines and names", () => {
  it("opens zoomed on the touched run, large cells with borders, and a minimap of the buffer", async () => {
    const h = host();
    const panel = new AccessPanel(h);
    await panel.show("j_1");
    const card = panel.el.querySelector<HTMLElement>('.mlc-acc-card[data-buffer="B"]')!;
    expect(card.dataset.view).toBe("5,6,5,8,1"); // rows 5..9, cols 6..13: the run and its context
    const canvas = card.querySelector<HTMLCanvasElement>("canvas.mlc-acc-canvas")!;
    expect([canvas.width, canvas.height]).toEqual([8, 5]);
    expect(parseFloat(canvas.style.width)).toBeGreaterThanOrEqual(8 * 24); // cells you can see
    // the run sits at row 2 (7 - 5), columns 2..5 (8 - 6)
    const u = panel.pixels("B")!;
    expect(px(u, 2 * 8 + 2)).toEqual(PALETTE.read);
    expect(px(u, 2 * 8 + 1)).toEqual(PALETTE.empty);
    expect(card.querySelector<HTMLElement>(".mlc-acc-grid")!.hidden).toBe(false);
    const mini = card.querySelector<HTMLElement>(".mlc-acc-mini")!;
    expect(mini.hidden).toBe(false);
    expect(card.querySelector<HTMLElement>(".mlc-acc-mini-box")!.style.width).not.toBe("");
    // clicking the minimap shows the whole buffer (no minimap then, and no borders at 2 px a cell)
    mini.click();
    const whole = panel.el.querySelector<HTMLElement>('.mlc-acc-card[data-buffer="B"]')!;
    expect(whole.dataset.view).toBe("0,0,128,128,1");
    expect(whole.querySelector<HTMLElement>(".mlc-acc-mini")!.hidden).toBe(true);
    expect(whole.querySelector<HTMLElement>(".mlc-acc-grid")!.hidden).toBe(true);
    expect(h.saved).toContainEqual({ region: "buffer" });
    expect(panel.el.querySelector<HTMLSelectElement>(".mlc-acc-region")!.value).toBe("buffer");
  });

  it("picks a block by its coordinates, not by a -1 number", async () => {
    const panel = new AccessPanel(host());
    await panel.show("j_1");
    const sel = panel.el.querySelector<HTMLSelectElement>("select.mlc-acc-block")!;
    expect(Array.from(sel.options).map((o) => o.textContent)).toEqual(["all blocks", "block 0 (0, 0)", "block 1 (1, 0)", "block 2 (0, 1)", "block 3 (1, 1)"]);
    expect(panel.el.textContent).not.toContain("-1");
    sel.value = "3";
    sel.dispatchEvent(new Event("change"));
    expect(panel.viewState.block).toBe(3);
  });
});

describe("the zoomed view says where it is", () => {
  it("names the rows and columns it shows", async () => {
    const panel = new AccessPanel(host());
    await panel.show("j_1");
    expect(panel.el.querySelector(".mlc-acc-range")!.textContent).toBe("rows 5–9 × cols 6–13");
  });
});

describe("threads of a block together", () => {
  function threadHost(swept: string[]) {
    const h = host();
    const inner = h.request.bind(h);
    h.request = async (method: string, params: Record<string, unknown> = {}) => {
      const reply = await inner(method, params);
      if (method === "access_footprint") {
        const r = reply.result as any;
        r.enclosing = [{ name: "tx", ref: "tx", extent: 64, min: 0, thread: "threadIdx.x", value: 0 }];
        r.at = { tx: 0 };
        r.swept = params.sweep_threads ? swept : [];
      }
      return reply;
    };
    return h;
  }

  it("an enclosing threadIdx loop runs over every thread by default; unticked, it is a slider again", async () => {
    const h = threadHost(["tx"]);
    const panel = new AccessPanel(h);
    await panel.show("k_0");
    expect(h.calls[0].params.sweep_threads).toBe(true);
    const slider = panel.el.querySelector<HTMLInputElement>('.mlc-acc-at-slider[data-loop="tx"]')!;
    expect(slider.disabled).toBe(true);
    expect(panel.el.querySelector(".mlc-acc-at-value")!.textContent).toBe("all");
    const box = panel.el.querySelector<HTMLInputElement>(".mlc-acc-sweep")!;
    expect(box.checked).toBe(true);
    box.checked = false;
    box.dispatchEvent(new Event("change"));
    await tick();
    expect(h.calls.filter((c) => c.method === "access_footprint").at(-1)!.params.sweep_threads).toBe(false);
    expect(h.saved).toContainEqual({ sweep_threads: false });
    expect(panel.el.querySelector<HTMLInputElement>('.mlc-acc-at-slider[data-loop="tx"]')!.disabled).toBe(false);
  });
});

const tick = () => new Promise((r) => setTimeout(r, 0));

describe("strips and untouched buffers", () => {
  /** R: a 1 x 128 row, all read; N: a 128 x 4 band, all read; U: a 64 x 64 buffer not touched. */
  function stripsHost() {
    const strip = (name: string, shape: number[], first: number) => {
      const n = shape[0] * shape[1];
      return {
        buffer: name, shape, dtype: "float32", scope: "global", itemsize: 4, distinct: n, accesses: n, n_reads: n, n_writes: 0,
        reuse: 1, cache_lines: 1, bounds: shape.map((s) => [0, s - 1]), strides: {}, crop: { offset: [0, 0], shape },
        arrays: {
          reads: { buffer: first, dtype: "bits", size: n, nbytes: Math.ceil(n / 8) },
          writes: { buffer: first + 1, dtype: "bits", size: n, nbytes: Math.ceil(n / 8) },
          first_touch: { buffer: first + 2, dtype: "int32", size: n, nbytes: 4 * n },
        },
      };
    };
    const result = {
      loop: { name: "i", ref: "i", extent: 128, min: 0, thread: null, loop_kind: "serial" }, enclosing: [], at: {}, steps: 128, gpu: false, launch: {},
      buffers: [
        strip("R", [1, 128], 0),
        strip("N", [128, 4], 3),
        { buffer: "U", shape: [64, 64], dtype: "float32", scope: "global", itemsize: 4, distinct: 0, accesses: 0, n_reads: 0, n_writes: 0,
          reuse: 0, cache_lines: 0, bounds: [], strides: {}, crop: { offset: [0, 0], shape: [0, 0] }, arrays: {} },
      ],
    };
    const arrays = (n: number) => [packbits(new Array(n).fill(1)), packbits(new Array(n).fill(0)), new Uint8Array(new Int32Array(n).map((_, i) => i).buffer)];
    const bufs = [...arrays(128), ...arrays(512)];
    return {
      async request(method: string) {
        if (method === "access_footprint") return { result: result as any, buffers: bufs.map((b) => new DataView(b.buffer)) };
        return { result: {} as any, buffers: [] };
      },
      saveState() {},
    };
  }

  it("a 1 x 128 row and a 128 x 4 band are drawn at least 28 px across, not as 2 px lines", async () => {
    const panel = new AccessPanel(stripsHost());
    await panel.show("i");
    const size = (b: string) => {
      const c = panel.el.querySelector<HTMLCanvasElement>(`.mlc-acc-card[data-buffer="${b}"] canvas.mlc-acc-canvas`)!;
      return [parseFloat(c.style.width), parseFloat(c.style.height)];
    };
    const [rw, rh] = size("R");
    expect(rh).toBeGreaterThanOrEqual(24);
    expect(rw).toBeGreaterThanOrEqual(128); // the long side keeps its scale
    const [nw, nh] = size("N");
    expect(nw).toBeGreaterThanOrEqual(24);
    expect(nh).toBeGreaterThanOrEqual(128);
  });

  it("an untouched buffer is one line, not a large empty card", async () => {
    const panel = new AccessPanel(stripsHost());
    await panel.show("i");
    const card = panel.el.querySelector<HTMLElement>('.mlc-acc-card[data-buffer="U"]')!;
    expect(card.classList.contains("mlc-acc-untouched")).toBe(true);
    expect(card.querySelector(".mlc-acc-untouched-note")!.textContent).toBe("not touched by this loop");
    expect(panel.el.querySelector('.mlc-acc-card[data-buffer="R"] .mlc-acc-untouched-note')).toBeNull();
  });
});

describe("one word for how a large buffer is drawn", () => {
  /** A 1024 x 1024 buffer sent pooled 4 x 4 (a 256 x 256 crop), every block touched. */
  function bigHost() {
    const n = 256 * 256;
    return {
      async request(method: string) {
        if (method !== "access_footprint") return { result: { warp: 0, threads: [], launch: {}, accesses: [] } as any, buffers: [] };
        const result: FootprintResult = {
          loop: { name: "i", ref: "i", extent: 1024, min: 0, thread: null, loop_kind: "serial" },
          enclosing: [],
          at: {},
          steps: 1024 ** 3,
          gpu: false,
          launch: {},
          buffers: [
            {
              buffer: "A", shape: [1024, 1024], dtype: "float32", scope: "global", itemsize: 4, distinct: 1024 * 1024, accesses: 1024 ** 3, n_reads: 1024 ** 3, n_writes: 0,
              reuse: 1024, cache_lines: 65536, bounds: [[0, 1023], [0, 1023]], strides: { i: 1024 }, crop: { offset: [0, 0], shape: [256, 256], pool: [4, 4] },
              arrays: { reads: { buffer: 0, dtype: "bits", size: n, nbytes: n / 8 }, writes: { buffer: 1, dtype: "bits", size: n, nbytes: n / 8 }, first_touch: { buffer: 2, dtype: "int32", size: n, nbytes: 4 * n } },
            },
          ],
        };
        const first = new Int32Array(n).map((_, i) => i);
        const bufs = [packbits(new Array(n).fill(1)), packbits(new Array(n).fill(0)), new Uint8Array(first.buffer)];
        return { result: result as any, buffers: bufs.map((b) => new DataView(b.buffer)) };
      },
    };
  }

  it("the head and the hover say the same block per pixel: the coarser of the data's pooling and the drawing's", async () => {
    // Before: the head said "one cell per 4×4 elements" (the data's pooling) while the hover said
    // "one pixel: 21×21 elements" (the drawing's); and "steps" were not explained.
    const panel = new AccessPanel({ ...bigHost(), maxPx: 200 } as any);
    await panel.show("i");
    const head = panel.el.querySelector(".mlc-acc-head")!.textContent!;
    expect(head).toContain("drawn pooled: one pixel per 6×6 elements"); // 1024 on 200 pixels: 6 a side
    expect(panel.el.querySelector<HTMLElement>(".mlc-acc-pooled")!.title).toContain("figures (distinct elements, cache lines, reuse, strides) are exact");
    expect(head).toContain("1,073,741,824 steps (runs of its body, in order)");
    const canvas = panel.el.querySelector<HTMLCanvasElement>("canvas.mlc-acc-canvas")!;
    canvas.getBoundingClientRect = () => ({ left: 0, top: 0, width: 200, height: 200, right: 200, bottom: 200, x: 0, y: 0, toJSON: () => ({}) });
    canvas.dispatchEvent(new MouseEvent("mousemove", { clientX: 10, clientY: 10 }));
    expect(panel.el.querySelector(".mlc-acc-tip")!.textContent).toContain("(one pixel: 6×6 elements, its earliest touch)");
  });
});
