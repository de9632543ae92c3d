// The access view: colour rules, trail fading, payload decoding, N-D slicing (pure functions), and
// the panel / standalone widget over a fake host with a stubbed canvas (jsdom has none).
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { AccessViewWidget, loopOptions } from "../access_view";
import { EMPTY_DARK, FUTURE_LEVEL, OUTSIDE_LEVEL, PALETTE, VISITED_LEVEL, elementColor, hueColor, kindColor, mix, orderColor, packRGBA, trailLevel, trailSteps } from "../access/color";
import { type FootprintResult, bit, decodeFootprint, describeElement, gridOf, indexAt, kindsFromMasks, sliceMap, threadText, typedArray } from "../access/data";
import { AccessPanel } from "../access/panel";
import { RpcFailure } from "../lib/rpc";
import { fakeModel, loop, mmRelu, px, stubCanvas, tick, treeBytes } from "./fixtures";

// ---- colour ------------------------------------------------------------------------------------

describe("colour rules", () => {
  it("gives reads, writes and both distinct colours", () => {
    const cs = [kindColor(0), kindColor(1), kindColor(2), kindColor(3)].map((c) => c.join());
    expect(new Set(cs).size).toBe(4);
    expect(kindColor(3)).toEqual(PALETTE.both);
  });

  it("mixes linearly", () => {
    expect(mix([0, 0, 0], [200, 100, 50], 0.5)).toEqual([100, 50, 25]);
    expect(elementColor(PALETTE.read, 1)).toEqual(PALETTE.read);
    expect(elementColor(PALETTE.read, 0)).toEqual(PALETTE.empty);
  });

  it("uses the same thread hues as the Python snapshot renderer", () => {
    // mlc_lab.widgets.access.view._hue_rgb([0, 1, 2, 3, 63])
    expect([0, 1, 2, 3, 63].map(hueColor)).toEqual([
      [224, 85, 85],
      [85, 126, 224],
      [166, 224, 85],
      [224, 85, 207],
      [224, 85, 139],
    ]);
  });

  it("orders first touches from dark to bright", () => {
    expect(orderColor(0)).toEqual([68, 1, 84]);
    expect(orderColor(2)).toEqual(orderColor(1));
  });

  it("packs RGBA for a little-endian Uint32 view of ImageData", () => {
    const u32 = new Uint32Array([packRGBA([1, 2, 3])]);
    expect(Array.from(new Uint8ClampedArray(u32.buffer))).toEqual([1, 2, 3, 255]);
  });
});

describe("trail fading", () => {
  it("shows the whole footprint when no step is chosen", () => {
    expect(trailLevel(5, -1, 10)).toBe(1);
  });

  it("lights an element fully at its first touch and fades it over the trail", () => {
    expect(trailLevel(10, 10, 4)).toBe(1);
    const levels = [10, 11, 12, 13, 14, 20].map((t) => trailLevel(10, t, 4));
    for (let i = 1; i < levels.length; i++) expect(levels[i]).toBeLessThanOrEqual(levels[i - 1]);
    expect(levels[4]).toBe(VISITED_LEVEL);
    expect(levels[5]).toBe(VISITED_LEVEL);
  });

  it("keeps a ghost of what is still to come", () => {
    expect(trailLevel(11, 10, 4)).toBe(FUTURE_LEVEL);
    expect(FUTURE_LEVEL).toBeLessThan(VISITED_LEVEL);
  });

  it("measures trails in steps, at least one", () => {
    expect(trailSteps(4, 0.02)).toBe(1);
    expect(trailSteps(1000, 0.08)).toBe(80);
  });
});

// ---- data --------------------------------------------------------------------------------------

/** zlib's deflate (what Python's zlib.compress writes), via the platform's CompressionStream. */
async function deflate(data: Uint8Array): Promise<Uint8Array> {
  const CS = (globalThis as any).CompressionStream;
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(data);
      c.close();
    },
  }).pipeThrough(new CS("deflate")) as ReadableStream<Uint8Array>;
  const reader = stream.getReader();
  const parts: number[] = [];
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(...value);
  }
  return new Uint8Array(parts);
}

/** numpy.packbits of a flat boolean list. */
function packbits(bits: boolean[]): Uint8Array {
  const out = new Uint8Array(Math.ceil(bits.length / 8));
  bits.forEach((b, i) => {
    if (b) out[i >> 3] |= 1 << (7 - (i & 7));
  });
  return out;
}

describe("payload decoding", () => {
  it("reads numpy's big-endian bit order", () => {
    const m = packbits([true, false, true, false, false, false, false, false, true]);
    expect([0, 1, 2, 8].map((i) => bit(m, i))).toEqual([1, 0, 1, 1]);
    expect(Array.from(kindsFromMasks(packbits([true, true, false]), packbits([false, true, true]), 3))).toEqual([1, 3, 2]);
  });

  it("copies unaligned little-endian integers", () => {
    const bytes = new Uint8Array([0, 1, 0, 0, 0, 255, 255, 255, 255]);
    expect(Array.from(typedArray(bytes.subarray(1), "int32"))).toEqual([1, -1]);
    expect(Array.from(typedArray(new Uint8Array([255, 0]), "int8"))).toEqual([-1, 0]);
  });

  it("decodes a footprint, deflated or not", async () => {
    const result = payload();
    const raw = rawBuffers();
    const fp = await decodeFootprint(result, raw);
    const b = fp.buffers[0];
    expect(Array.from(b.kind)).toEqual([1, 1, 3, 0]);
    expect(Array.from(b.first)).toEqual([0, 1, 2, -1]);
    expect(Array.from(b.thread!)).toEqual([0, 1, 2, -1]);
    expect(fp.buffers[1].size).toBe(0); // untouched: no arrays
    const deflated = payload(true);
    const packed = await Promise.all(raw.map(deflate));
    const fp2 = await decodeFootprint(deflated, packed.map((x) => new DataView(x.buffer as ArrayBuffer)));
    expect(Array.from(fp2.buffers[0].first)).toEqual([0, 1, 2, -1]);
  });
});

describe("N-D slicing", () => {
  it("lays 1-D out as a strip, 2-D as a grid, more dims with sliders", () => {
    expect(gridOf([1027])).toEqual({ rows: 1, cols: 1027, lead: [] });
    expect(gridOf([4, 5])).toEqual({ rows: 4, cols: 5, lead: [] });
    expect(gridOf([2, 3, 4, 5])).toEqual({ rows: 4, cols: 5, lead: [2, 3] });
    expect(gridOf([])).toEqual({ rows: 1, cols: 1, lead: [] });
  });

  it("maps pixels of a 2-D buffer to the crop box", () => {
    const s = sliceMap([4, 5], { offset: [1, 2], shape: [2, 2] }, []);
    expect(s.rows).toBe(4);
    expect(s.cols).toBe(5);
    const hits = Array.from(s.map).map((v, p) => [p, v]).filter(([, v]) => v >= 0);
    expect(hits).toEqual([
      [7, 0],
      [8, 1],
      [12, 2],
      [13, 3],
    ]);
    const t = sliceMap([4, 5], { offset: [1, 2], shape: [2, 2] }, [], "touched");
    expect([t.rows, t.cols, t.r0, t.c0, Array.from(t.map)]).toEqual([2, 2, 1, 2, [0, 1, 2, 3]]);
    expect(indexAt([4, 5], [], t, 1, 0)).toEqual([2, 2]);
  });

  it("slices a 3-D buffer at the leading index", () => {
    const crop = { offset: [1, 0, 0], shape: [2, 2, 2] };
    expect(Array.from(sliceMap([3, 2, 2], crop, [0]).map)).toEqual([-1, -1, -1, -1]); // outside the crop
    expect(Array.from(sliceMap([3, 2, 2], crop, [2]).map)).toEqual([4, 5, 6, 7]);
    expect(indexAt([3, 2, 2], [2], sliceMap([3, 2, 2], crop, [2]), 1, 1)).toEqual([2, 1, 1]);
  });

  it("draws a pooled crop (the kernel's blocks) over the buffer elements it stands for", () => {
    // a 4 x 6 buffer whose rows 0-3 and columns 2-5 came as a 2 x 2 array, one element per 2 x 2 block
    const crop = { offset: [0, 2], shape: [2, 2], pool: [2, 2] };
    const s = sliceMap([4, 6], crop, []);
    expect([s.rows, s.cols]).toEqual([4, 6]);
    expect(Array.from(s.map)).toEqual([-1, -1, 0, 0, 1, 1, -1, -1, 0, 0, 1, 1, -1, -1, 2, 2, 3, 3, -1, -1, 2, 2, 3, 3]);
    const t = sliceMap([4, 6], crop, [], "touched");
    expect([t.rows, t.cols, t.r0, t.c0]).toEqual([4, 4, 0, 2]); // the box in buffer elements
    // pooled on screen too: each pixel keeps the earliest of the blocks under it
    const kind = new Uint8Array([1, 1, 1, 1]);
    const first = new Int32Array([9, 3, 7, 5]);
    const small = sliceMap([4, 6], crop, [], "buffer", { maxPx: 3, kind, first });
    expect([small.rows, small.cols, small.f]).toEqual([2, 3, 2]);
    expect(Array.from(small.map)).toEqual([-1, 0, 1, -1, 2, 3]);
  });

  it("handles 1-D buffers and empty crops", () => {
    const s = sliceMap([6], { offset: [2], shape: [3] }, []);
    expect(Array.from(s.map)).toEqual([-1, -1, 0, 1, 2, -1]);
    expect(indexAt([6], [], s, 0, 4)).toEqual([4]);
    expect(Array.from(sliceMap([6], { offset: [0], shape: [0] }, []).map).every((v) => v === -1)).toBe(true);
  });

  it("describes an element for the hover", async () => {
    const fp = await decodeFootprint(payload(), rawBuffers());
    const b = fp.buffers[0];
    expect(describeElement(b, [2], 2, { "threadIdx.x": 64 })).toBe("A[2]: read and written, first at step 2, thread 2, block 1");
    expect(describeElement(b, [3], 3)).toBe("A[3]: not touched");
    expect(threadText(10, { "threadIdx.x": 8, "threadIdx.y": 8 }, "threadIdx")).toBe("10 (2, 1)");
  });
});

// ---- the panel --------------------------------------------------------------------------------------

/** A 4-element 1-D buffer A (read, read, read+write, untouched) and an untouched B. */
function payload(deflate = false): FootprintResult {
  const enc = deflate ? { enc: "deflate" as const } : {};
  return {
    loop: { name: "j_1", ref: "j_1", extent: 4, min: 0, thread: null, loop_kind: "serial" },
    enclosing: [{ name: "i", ref: "Y/i", extent: 128, min: 0, thread: null, loop_kind: "serial", value: 3 }],
    at: { "Y/i": 3 },
    steps: 3,
    gpu: true,
    launch: { "threadIdx.x": 64, "blockIdx.x": 2 },
    buffers: [
      {
        buffer: "A", shape: [4], dtype: "float32", scope: "global", itemsize: 4, distinct: 3, accesses: 4, n_reads: 3, n_writes: 1,
        reuse: 1.33, cache_lines: 1, bounds: [[0, 3]], strides: { i: 0, j_1: 1 }, crop: { offset: [0], shape: [4] },
        arrays: {
          reads: { buffer: 0, dtype: "bits", size: 4, nbytes: 1, ...enc },
          writes: { buffer: 1, dtype: "bits", size: 4, nbytes: 1, ...enc },
          first_touch: { buffer: 2, dtype: "int32", size: 4, nbytes: 16, ...enc },
          thread: { buffer: 3, dtype: "int8", size: 4, nbytes: 4, ...enc },
          block: { buffer: 4, dtype: "int8", size: 4, nbytes: 4, ...enc },
        },
      },
      {
        buffer: "B", shape: [2, 2], dtype: "float32", scope: "shared", itemsize: 4, distinct: 0, accesses: 0, n_reads: 0, n_writes: 0,
        reuse: 0, cache_lines: 0, bounds: [null, null], strides: {}, crop: { offset: [0, 0], shape: [0, 0] }, arrays: {},
      },
    ],
  };
}

function rawBuffers(): Uint8Array[] {
  return [
    packbits([true, true, true, false]),
    packbits([false, false, true, false]),
    new Uint8Array(new Int32Array([0, 1, 2, -1]).buffer),
    new Uint8Array(new Int8Array([0, 1, 2, -1]).buffer),
    new Uint8Array(new Int8Array([1, 1, 1, -1]).buffer),
  ];
}

function fakeHost(fail: unknown = null) {
  return {
    calls: [] as Array<{ method: string; params: any }>,
    saved: [] as any[],
    fail,
    async request(method: string, params: any = {}) {
      this.calls.push({ method, params });
      if (this.fail) throw this.fail;
      if (method === "access_footprint") return { result: payload() as any, buffers: rawBuffers().map((b) => new DataView(b.buffer)) };
      return {
        result: { warp: (params.warp as number) ?? 0, threads: [0, 31], launch: {}, accesses: [{ buffer: "A", block: "C", kind: "read", scope: "global", index: "vi", requests: 1, lanes: 32, vector: 1, active_lanes: 32, sectors_per_request: 4, efficiency: 1 }] } as any,
        buffers: [],
      };
    },
    saveState(s: any) {
      this.saved.push(s);
    },
  };
}

let frames: FrameRequestCallback[] = [];

beforeEach(() => {
  frames = [];
  stubCanvas((cb) => frames.push(cb));
});

afterEach(() => {
  vi.restoreAllMocks();
  vi.unstubAllGlobals();
});

describe("AccessPanel", () => {
  it("shows a long analysis's progress and cancels it; the kernel's 'cancelled' ends the wait", async () => {
    let progress: (done: number, total: number) => void = () => undefined;
    let answer: (err: unknown) => void = () => undefined;
    const calls: string[] = [];
    const host = {
      async request(method: string): Promise<any> {
        calls.push(method);
        if (method === "access_cancel") {
          answer(new RpcFailure({ summary: "the analysis of loop i was cancelled", type: "cancelled" }));
          return { result: {}, buffers: [] };
        }
        return new Promise((_resolve, reject) => (answer = reject));
      },
      onProgress(cb: (done: number, total: number) => void) {
        progress = cb;
      },
    };
    const panel = new AccessPanel(host as any);
    const shown = panel.show("i");
    await tick();
    const status = panel.el.querySelector(".mlc-acc-status")!;
    const cancel = panel.el.querySelector<HTMLButtonElement>(".mlc-acc-cancel")!;
    expect(status.textContent).toBe("analysing…");
    expect(cancel.hidden).toBe(false);
    progress(3, 9);
    expect(status.textContent).toBe("analysing… 3 of 9 parts");
    cancel.click();
    await shown;
    expect(calls).toEqual(["access_footprint", "access_cancel"]);
    expect(cancel.hidden).toBe(true);
    expect(status.textContent).toBe("");
    expect(panel.el.querySelector(".mlc-acc-error")!.textContent).toContain("was cancelled");
  });

  it("asks for the selected loop and draws one heatmap and stats table per buffer", async () => {
    const host = fakeHost();
    const panel = new AccessPanel(host);
    await panel.show("j_1", { "Y/i": 3 });
    expect(host.calls[0]).toEqual({ method: "access_footprint", params: { loop: "j_1", at: { "Y/i": 3 }, sweep_threads: true } });
    const cards = panel.el.querySelectorAll(".mlc-acc-card");
    expect(Array.from(cards).map((c) => (c as HTMLElement).dataset.buffer)).toEqual(["A", "B"]);
    expect(panel.el.querySelector(".mlc-acc-stats")!.textContent).toContain("distinct3");
    expect(panel.el.querySelector(".mlc-acc-stride-self")!.textContent).toBe("j_1: 1");
    expect(panel.el.querySelectorAll(".mlc-acc-at-slider").length).toBe(1);
    const u = panel.pixels("A");
    expect(px(u, 0)).toEqual(PALETTE.read);
    expect(px(u, 2)).toEqual(PALETTE.both);
    expect(px(u, 3)).toEqual(PALETTE.empty);
  });

  it("moves an enclosing loop with its slider and fetches again", async () => {
    const host = fakeHost();
    const panel = new AccessPanel(host);
    await panel.show("j_1");
    const slider = panel.el.querySelector<HTMLInputElement>(".mlc-acc-at-slider")!;
    slider.value = "9";
    slider.dispatchEvent(new Event("change"));
    await tick();
    expect(host.calls.filter((c) => c.method === "access_footprint").at(-1)!.params.at).toEqual({ "Y/i": 9 });
    expect(host.saved).toContainEqual({ at: { "Y/i": 9 } });
  });

  it("scrubs through first touches with a fading trail", async () => {
    const panel = new AccessPanel(fakeHost());
    await panel.show("j_1");
    panel.setTime(0, true);
    const u = panel.pixels("A");
    expect(px(u, 0)).toEqual(PALETTE.read); // touched now
    expect(px(u, 1)).not.toEqual(PALETTE.read); // still to come: a ghost
    const ghost = px(u, 1);
    panel.setTime(2, true);
    expect(px(u, 2)).toEqual(PALETTE.both);
    expect(px(u, 1)).not.toEqual(ghost);
    expect(panel.el.dataset.time).toBe("2");
    expect(panel.el.querySelector(".mlc-acc-step")!.textContent).toBe("step 2 / 3");
  });

  it("plays: the scrubber advances frame by frame and stops at the end", async () => {
    const panel = new AccessPanel(fakeHost());
    await panel.show("j_1");
    panel.play();
    expect(panel.el.dataset.time).toBe("0");
    expect(panel.el.querySelector(".mlc-acc-play")!.textContent).toContain("Pause");
    let now = performance.now();
    const seen = new Set<string>();
    for (let i = 0; i < 1000 && frames.length; i++) {
      const cb = frames.shift()!;
      now += 50;
      cb(now);
      seen.add(panel.el.dataset.time!);
    }
    expect([...seen]).toEqual(["0", "1", "2"]); // every step shown, in order (3 steps over the 5 s default)
    expect(panel.el.dataset.time).toBe("2");
    expect(panel.el.querySelector(".mlc-acc-play")!.textContent).toContain("Play");
  });

  it("colours by thread and dims all but the picked warp and block", async () => {
    const host = fakeHost();
    const panel = new AccessPanel(host);
    await panel.show("j_1");
    await tick();
    expect(host.calls.some((c) => c.method === "access_gpu_stats")).toBe(true);
    expect(panel.el.querySelector(".mlc-acc-gpu-table")!.textContent).toContain("sectors/req");
    panel.setColorBy("thread");
    expect(px(panel.pixels("A"), 1)).toEqual(hueColor(1));
    panel.pick({ block: 0 }); // A's elements are all in block 1
    const dim = mix(PALETTE.empty, hueColor(1), OUTSIDE_LEVEL);
    expect(px(panel.pixels("A"), 1)).toEqual(dim);
    await tick();
    expect(host.calls.at(-1)).toEqual({ method: "access_gpu_stats", params: { loop: "j_1", at: { "Y/i": 3 }, block: 0 } });
  });

  it("shows an error state when the analysis refuses the loop", async () => {
    const panel = new AccessPanel(fakeHost(new RpcFailure({ summary: "the access analysis cannot show loop x: not affine", detail: "A[B[i]]" })));
    await panel.show("x");
    const err = panel.el.querySelector<HTMLElement>(".mlc-acc-error")!;
    expect(err.hidden).toBe(false);
    expect(err.textContent).toContain("cannot show loop x");
    expect(panel.el.querySelectorAll(".mlc-acc-card").length).toBe(0);
  });

  it("asks for the values of symbolic shapes the error names and sends them with the next request", async () => {
    const host = fakeHost(new RpcFailure({ summary: "the access analysis cannot show loop i: function main has symbolic shapes m, n", type: "analysis", shape_vars: ["m", "n"] }));
    const panel = new AccessPanel(host);
    await panel.show("i");
    // a question, not a red error with a Python hint (shape_vars={...})
    expect(panel.el.querySelector<HTMLElement>(".mlc-acc-error")!.hidden).toBe(true);
    expect(panel.el.classList.contains("mlc-acc-has-error")).toBe(false);
    expect(panel.el.querySelector(".mlc-acc-ask")!.textContent).toBe("This program's shapes are symbolic (m, n): give them values to draw the memory loop i touches.");
    expect(panel.el.textContent).not.toContain("shape_vars");
    const fields = Array.from(panel.el.querySelectorAll<HTMLInputElement>(".mlc-acc-shape-var"));
    expect(fields.map((f) => f.dataset.var)).toEqual(["m", "n"]);
    const analyse = panel.el.querySelector<HTMLButtonElement>(".mlc-acc-shape-apply")!;
    fields[0].value = "64";
    analyse.click(); // n is still empty: nothing is asked
    await tick();
    expect(host.calls.length).toBe(1);
    expect(fields[1].getAttribute("aria-invalid")).toBe("true");
    host.fail = null;
    fields[1].value = "128";
    analyse.click();
    await tick();
    const asked = host.calls.filter((c) => c.method === "access_footprint");
    expect(asked.at(-1)).toEqual({ method: "access_footprint", params: { loop: "i", at: {}, sweep_threads: true, shape_vars: { m: 64, n: 128 } } });
    expect(host.calls.filter((c) => c.method === "access_gpu_stats").at(-1)!.params.shape_vars).toEqual({ m: 64, n: 128 });
    expect(host.saved).toContainEqual({ shape_vars: { m: 64, n: 128 } });
    expect(panel.el.querySelector<HTMLElement>(".mlc-acc-error")!.hidden).toBe(true);
    expect(panel.el.querySelectorAll(".mlc-acc-card").length).toBe(2);
  });

  it("shows no shape fields for a program without symbolic shapes", async () => {
    const panel = new AccessPanel(fakeHost());
    await panel.show("j_1");
    expect(panel.el.querySelector<HTMLElement>(".mlc-acc-shapes")!.hidden).toBe(true);
    expect(panel.el.querySelectorAll(".mlc-acc-shape-var").length).toBe(0);
  });

  it("shows a hint when no loop is selected", async () => {
    const host = fakeHost();
    const panel = new AccessPanel(host);
    await panel.show(null);
    expect(host.calls.length).toBe(0);
    expect(panel.el.textContent).toContain("Select a loop");
  });
});

describe("AccessView widget", () => {
  it("lists the loops of the program in order", () => {
    const opts = loopOptions(mmRelu());
    expect(opts.map((o) => o.ref)).toEqual(["Y/i", "Y/j", "k", "C/i", "C/j"]);
    expect(opts[2].depth).toBe(2);
  });

  it("follows the loop trait and writes user changes back", async () => {
    const tree = mmRelu();
    tree.functions[0].children.push(loop("t", 8, [], { thread: "threadIdx.x" }));
    const model = fakeModel({ loop_tree_json: treeBytes(tree) } as any) as any;
    Object.assign(model.state, { loop: "k", at: {}, color_by: "access", warp: -1, block: -1, time: -1, height: "" });
    const w = new AccessViewWidget(model);
    await tick();
    expect(model.requests()[0].method).toBe("access_footprint");
    expect(model.requests()[0].params.loop).toBe("k");
    const picker = w.root.querySelector<HTMLSelectElement>(".mlc-acc-picker")!;
    expect(picker.value).toBe("k");
    picker.value = "C/j";
    picker.dispatchEvent(new Event("change"));
    expect(model.state.loop).toBe("C/j");
    expect(model.save_changes).toHaveBeenCalled();
    expect(model.requests().at(-1).params.loop).toBe("C/j");
    w.dispose();
  });
});

describe("N-D buffers in the panel", () => {
  it("draws one 2-D slice with a slider per leading dim", async () => {
    // C[2, 2, 3]: elements [1, 0, 0..2] read (first touches 0..2)
    const result: FootprintResult = {
      loop: { name: "t", ref: "t", extent: 3, min: 0, thread: null, loop_kind: "serial" },
      enclosing: [],
      at: {},
      steps: 3,
      gpu: false,
      launch: {},
      buffers: [
        {
          buffer: "C", shape: [2, 2, 3], dtype: "float32", scope: "global", itemsize: 4, distinct: 3, accesses: 3, n_reads: 3, n_writes: 0,
          reuse: 1, cache_lines: 1, bounds: [[1, 1], [0, 0], [0, 2]], strides: { t: 1 }, crop: { offset: [1, 0, 0], shape: [1, 1, 3] },
          arrays: {
            reads: { buffer: 0, dtype: "bits", size: 3, nbytes: 1 },
            writes: { buffer: 1, dtype: "bits", size: 3, nbytes: 1 },
            first_touch: { buffer: 2, dtype: "int32", size: 3, nbytes: 12 },
          },
        },
      ],
    };
    const host = {
      async request() {
        return { result: result as any, buffers: [packbits([true, true, true]), packbits([false, false, false]), new Uint8Array(new Int32Array([0, 1, 2]).buffer)].map((b) => new DataView(b.buffer)) };
      },
    };
    const panel = new AccessPanel(host);
    await panel.show("t");
    const slider = panel.el.querySelector<HTMLInputElement>(".mlc-acc-dim")!;
    expect(slider.max).toBe("1");
    expect(slider.value).toBe("1"); // starts at the first touched slice
    expect(px(panel.pixels("C"), 0)).toEqual(PALETTE.read);
    slider.value = "0";
    slider.dispatchEvent(new Event("input"));
    expect(px(panel.pixels("C"), 0)).toEqual(PALETTE.empty);
  });
});

describe("the explorer's Memory panel", () => {
  it("follows the explorer's selection", async () => {
    const { default: widget } = await import("../explorer");
    const model = fakeModel({ selection: { kind: "loop", name: "k" } } as any) as any;
    const el = document.createElement("div");
    document.body.append(el);
    const cleanup = (await widget.render({ model, el, signal: new AbortController().signal } as any)) as any;
    el.querySelector<HTMLButtonElement>(".mlc-memory-toggle")!.click();
    expect(el.querySelector<HTMLElement>(".mlc-memory")!.hidden).toBe(false);
    expect(model.requests().at(-1)).toMatchObject({ method: "access_footprint", params: { loop: "k" } });
    model.set("selection", { kind: "block", name: "C" }); // a block: the loop around it
    await tick();
    expect(model.requests().at(-1)).toMatchObject({ method: "access_footprint", params: { loop: "C/j" } });
    if (typeof cleanup === "function") cleanup();
    el.remove();
  });
});

describe("the panel while a new loop is analysed, and answers it keeps", () => {
  /** A host whose answers wait until `release()`, keyed by step. */
  function slowHost() {
    const host = {
      step: "1" as string | null,
      calls: [] as Array<{ method: string; params: any }>,
      pending: [] as Array<() => void>,
      request(method: string, params: any = {}): Promise<any> {
        host.calls.push({ method, params });
        const answer = method === "access_footprint" ? { result: { ...payload(), loop: { ...payload().loop, name: params.loop, ref: params.loop } } as any, buffers: rawBuffers().map((b) => new DataView(b.buffer)) } : { result: { warp: 0, threads: [0, 31], launch: {}, accesses: [] }, buffers: [] };
        return new Promise((resolve) => host.pending.push(() => resolve(answer)));
      },
      release() {
        for (const go of host.pending.splice(0)) go();
      },
      stepKey: () => host.step,
    };
    return host;
  }
  const footprints = (host: ReturnType<typeof slowHost>) => host.calls.filter((c) => c.method === "access_footprint").map((c) => c.params.loop);

  it("names the loop it analyses and greys the previous loop's picture until the answer comes", async () => {
    // Before: the head kept the previous loop's name and picture for the whole analysis (21 s under load).
    const host = slowHost();
    const panel = new AccessPanel(host as any);
    const first = panel.show("j_1");
    await tick();
    host.release();
    await first;
    expect(panel.el.querySelector(".mlc-acc-head")!.textContent).toContain("Memory touched by loop j_1");
    const next = panel.show("k");
    await tick();
    const head = panel.el.querySelector(".mlc-acc-head")!.textContent!;
    expect(head).toContain("Analysing loop k…");
    expect(head).toContain("below: loop j_1, until it answers");
    expect(panel.el.classList.contains("mlc-acc-stale")).toBe(true);
    expect(panel.el.querySelectorAll(".mlc-acc-card").length).toBe(2); // the old picture, greyed
    host.release();
    await next;
    expect(panel.el.classList.contains("mlc-acc-stale")).toBe(false);
    expect(panel.el.querySelector(".mlc-acc-head")!.textContent).toContain("Memory touched by loop k");
  });

  it("keeps answers per (step, loop): a loop analysed before at this step is drawn again without asking", async () => {
    const host = slowHost();
    const panel = new AccessPanel(host as any);
    for (const loop of ["j_1", "k"]) {
      const p = panel.show(loop);
      await tick();
      host.release();
      await p;
    }
    expect(footprints(host)).toEqual(["j_1", "k"]);
    await panel.show("j_1"); // seconds later, the same loop at the same step: no request
    expect(footprints(host)).toEqual(["j_1", "k"]);
    expect(panel.el.querySelector(".mlc-acc-head")!.textContent).toContain("Memory touched by loop j_1");
    host.step = "2"; // another step: its own answer
    const p = panel.show("j_1", undefined, true);
    await tick();
    expect(footprints(host)).toEqual(["j_1", "k", "j_1"]);
    host.release();
    await p;
    host.step = "1"; // back (an undo): kept
    await panel.show("k", undefined, true);
    expect(footprints(host)).toEqual(["j_1", "k", "j_1"]);
  });

  it("keeps nothing when the host names no step (a plain program)", async () => {
    const host = slowHost();
    host.step = null;
    const panel = new AccessPanel(host as any);
    for (const loop of ["j_1", "k", "j_1"]) {
      const p = panel.show(loop);
      await tick();
      host.release();
      await p;
    }
    expect(footprints(host)).toEqual(["j_1", "k", "j_1"]);
  });

  it("draws untouched elements dark on a dark theme (they were white boxes)", async () => {
    document.body.dataset.jpThemeLight = "false";
    try {
      const panel = new AccessPanel(fakeHost());
      await panel.show("j_1");
      expect(px(panel.pixels("A"), 3)).toEqual(EMPTY_DARK);
      expect(px(panel.pixels("A"), 0)).toEqual(PALETTE.read);
    } finally {
      delete document.body.dataset.jpThemeLight;
    }
    const light = new AccessPanel(fakeHost());
    await light.show("j_1");
    expect(px(light.pixels("A"), 3)).toEqual(PALETTE.empty);
  });

  it("says what a step is", async () => {
    const panel = new AccessPanel(fakeHost());
    await panel.show("j_1");
    const steps = panel.el.querySelector<HTMLElement>(".mlc-acc-steps")!;
    expect(steps.textContent).toBe(" · 3 steps (runs of its body, in order)");
    expect(steps.title).toContain("one run of the loop's body");
  });
});
