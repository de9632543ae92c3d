// @vitest-environment jsdom
import { describe, expect, it } from "vitest";
import widget from "../explorer";
import { cudaLanguage, launchShape } from "../lowering/cuda";
import { keyAction } from "../explorer/keys";
import { checkMark, checkTitle, formatLatency, latencyPlot, logRange, logTicks, measurementText, measurementTitle, plotPoints } from "../measure/measure";
import { EMPTY_MEASUREMENT, MEASUREMENT_HOVER, type Measurement } from "../lib/model";
import unsteady from "../../tests/fixtures/measurement_unsteady.json";
import { mounted, tick } from "./fixtures";

const steps = [
  { id: 0, parent: null, children: [1, 3], primitive: "", label: "original program" },
  { id: 1, parent: 0, children: [2], primitive: "split", label: "split(j)" },
  { id: 2, parent: 1, children: [], primitive: "reorder", label: "reorder" },
  { id: 3, parent: 0, children: [], primitive: "parallel", label: "parallel(i)" },
];
const m = (latency_s: number, extra: Partial<Measurement> = {}): Measurement => ({ ...EMPTY_MEASUREMENT, latency_s, gflops: 4.21e6 / latency_s / 1e9, correct: true, max_abs_error: 0, repeats: 5, target: "cpu", ...extra });

describe("measurement text", () => {
  it("formats latencies in the unit that fits", () => {
    expect(formatLatency(0.002628)).toBe("2.63 ms");
    expect(formatLatency(4.12e-5)).toBe("41.2 µs");
    expect(formatLatency(1.2)).toBe("1.20 s");
    expect(formatLatency(null)).toBe("—");
  });

  it("says latency, GFLOP/s and the correctness check", () => {
    expect(measurementText(m(0.002628))).toBe("2.63 ms · 1.60 GFLOP/s");
    expect(checkMark(m(0.001))).toBe("✓");
    expect(checkMark(m(0.001, { correct: false, max_abs_error: 0.5 }))).toBe("✗");
    expect(checkTitle(m(0.001, { correct: false, max_abs_error: 0.5 }))).toContain("max |error| 0.500");
    expect(measurementText({ ...EMPTY_MEASUREMENT, error: "boom", error_kind: "build" })).toBe("failed: build");
    expect(checkMark({ ...EMPTY_MEASUREMENT, error: "boom" })).toBe("");
  });
});

describe("latency plot", () => {
  it("takes the measured steps of the current path, then on along the newest child", () => {
    const meas = { "0": m(0.004), "2": m(0.001), "3": m(0.0005) };
    expect(plotPoints(steps, 2, meas).map((p) => [p.id, p.current, p.after])).toEqual([
      [0, false, false],
      [2, true, false],
    ]);
    // at step 1: step 2 (what redo reaches) still shows, marked as after the current step
    expect(plotPoints(steps, 1, meas).map((p) => [p.id, p.current, p.after])).toEqual([
      [0, false, false],
      [2, false, true],
    ]);
    // on the other branch, its own measurement
    expect(plotPoints(steps, 3, meas).map((p) => p.id)).toEqual([0, 3]);
    expect(plotPoints(steps, 2, {})).toEqual([]);
  });

  it("draws one point per measured step on a log axis (faster = lower)", () => {
    const svg = latencyPlot(plotPoints(steps, 2, { "0": m(0.01), "1": m(0.001, { correct: false }), "2": m(0.0001) }), { width: 260, height: 120 })!;
    expect(svg.tagName.toLowerCase()).toBe("svg");
    const dots = Array.from(svg.querySelectorAll("circle"));
    expect(dots.map((d) => d.getAttribute("data-step"))).toEqual(["0", "1", "2"]);
    const ys = dots.map((d) => Number(d.getAttribute("cy")));
    // equal ratios are equal distances on a log axis
    expect(ys[0]).toBeLessThan(ys[1]);
    expect(ys[1]).toBeLessThan(ys[2]);
    expect(Math.abs(ys[1] - ys[0] - (ys[2] - ys[1]))).toBeLessThan(0.2);
    expect(dots[1].classList.contains("mlc-plot-wrong")).toBe(true);
    expect(dots[2].classList.contains("mlc-plot-current")).toBe(true);
    expect(dots[0].querySelector("title")?.textContent).toContain("10.0 ms");
    expect(svg.querySelector("path.mlc-plot-line")?.getAttribute("d")).toMatch(/^M[\d.]+,[\d.]+ L[\d.]+,[\d.]+ L/);
    const ticks = Array.from(svg.querySelectorAll(".mlc-plot-tick")).map((t) => t.textContent);
    expect(ticks).toEqual(expect.arrayContaining(["100 µs", "1.00 ms", "10.0 ms"]));
    expect(latencyPlot([])).toBeNull();
  });

  it("pads a narrow range and still gives ticks", () => {
    const r = logRange([0.002, 0.002]);
    expect(r[0]).toBeLessThan(Math.log10(0.002));
    expect(r[1]).toBeGreaterThan(Math.log10(0.002));
    expect(logTicks(r).length).toBeGreaterThan(0);
    const one = latencyPlot(plotPoints(steps, 0, { "0": m(0.002) }))!;
    expect(one.querySelectorAll("circle").length).toBe(1);
    expect(one.querySelector("path")).toBeNull();
  });
});

describe("cuda helpers", () => {
  it("reads grid and block shapes from the thread extents", () => {
    expect(launchShape({ name: "k", thread_extents: { "blockIdx.x": 8, "threadIdx.x": 128 } })).toEqual({ grid: "8", block: "128" });
    expect(launchShape({ name: "k", thread_extents: { "blockIdx.x": 4, "blockIdx.y": 2, "threadIdx.x": 32, "threadIdx.y": 4 } })).toEqual({ grid: "4 × 2", block: "32 × 4" });
  });

  it("m is the measure key", () => {
    expect(keyAction({ key: "m" })).toEqual({ type: "measure" });
    expect(keyAction({ key: "m", ctrlKey: true })).toBeNull();
    expect(cudaLanguage.name).toBe("cuda");
  });
});

describe("explorer with measurements", () => {
  const ui = mounted(widget);
  const { mount, $ } = ui;

  it("shows latency, GFLOP/s and ✓/✗ in the history rows, and the plot", async () => {
    const model = await mount({ history: steps, step: { id: 2, parent: 1 }, measurements: { "0": m(0.004), "2": m(0.001, { correct: false, max_abs_error: 0.25 }) }, measuring: {} });
    await tick();
    const row0 = $('.mlc-hrow[data-step="0"] .mlc-hmeasure')!;
    expect(row0.textContent).toContain("4.00 ms");
    expect(row0.textContent).toContain("GFLOP/s");
    expect(row0.querySelector(".mlc-hcheck")?.textContent).toBe("✓");
    const row2 = $('.mlc-hrow[data-step="2"] .mlc-hcheck')!;
    expect(row2.textContent).toBe("✗");
    expect(row2.title).toContain("max |error| 0.250");
    expect($('.mlc-hrow[data-step="1"] .mlc-hmeasure')).toBeNull();
    expect(ui.el.querySelectorAll(".mlc-plot circle").length).toBe(2);
    expect($(".mlc-plot")!.hidden).toBe(false);
    // a new measurement arrives from Python
    model.set("measurements", { ...(model.get("measurements") as object), "1": m(0.002) });
    await tick();
    expect($('.mlc-hrow[data-step="1"] .mlc-hmeasure')?.textContent).toContain("2.00 ms");
    expect(ui.el.querySelectorAll(".mlc-plot circle").length).toBe(3);
  });

  it("Measure (button or m) asks Python for the current step on the chosen target; shows measuring…", async () => {
    const model = await mount({ history: steps, step: { id: 1, parent: 0 }, measurements: {}, measuring: {} });
    expect($(".mlc-plot")!.hidden).toBe(true);
    $(".mlc-measure")!.click();
    let req = model.requests().at(-1)!;
    expect(req.method).toBe("measure");
    expect(req.params).toEqual({ target: "cpu", step: 1 });
    model.set("measuring", { step: 1, target: "cpu" });
    await tick();
    expect(($(".mlc-measure") as HTMLButtonElement).disabled).toBe(true);
    expect($(".mlc-measure")!.textContent).toContain("measuring");
    expect($(".mlc-measure")!.title).toContain("step 1");
    expect($('.mlc-hrow[data-step="1"] .mlc-hmeasuring')?.textContent).toBe("measuring…");
    model.reply({ step: 1, measurement: m(0.002) });
    model.set("measuring", {});
    model.set("measurements", { "1": m(0.002) });
    await tick();
    expect(($(".mlc-measure") as HTMLButtonElement).disabled).toBe(false);
    expect($('.mlc-hrow[data-step="1"] .mlc-hmeasure')?.textContent).toContain("2.00 ms");
    // keyboard, with cuda chosen
    (($(".mlc-measure-target") as HTMLSelectElement).value = "cuda");
    $(".mlc-explorer")!.dispatchEvent(new KeyboardEvent("keydown", { key: "m", bubbles: true, cancelable: true }));
    req = model.requests().at(-1)!;
    expect(req.params).toEqual({ target: "cuda", step: 1 });
    // no GPU: Python sets the error trait and answers with a failure; the banner shows it
    model.set("error", { source: "measure", primitive: "measure on cuda", summary: "no CUDA GPU found; you can still build", kind: "no_gpu" });
    model.reply({ summary: "no CUDA GPU found; you can still build", type: "no_gpu" }, false);
    await tick();
    expect($(".mlc-banner")!.hidden).toBe(false);
    expect($(".mlc-banner .mlc-error-summary")?.textContent).toBe("measure on cuda: no CUDA GPU found; you can still build");
  });

  it("a measurement has a Cancel; a cancelled one leaves no banner and the step unmeasured", async () => {
    const model = await mount({ history: steps, step: { id: 1, parent: 0 }, measurements: {}, measuring: {} });
    expect($(".mlc-measure-cancel")!.hidden).toBe(true);
    ($(".mlc-measure") as HTMLButtonElement).click();
    model.set("measuring", { step: 1, target: "cpu" });
    await tick();
    const cancel = $(".mlc-measure-cancel") as HTMLButtonElement;
    expect(cancel.hidden).toBe(false);
    cancel.click();
    expect(model.requests().at(-1)!.method).toBe("measure_cancel");
    model.reply({});
    // Python stops the worker, clears `measuring` and answers the measure request "cancelled"
    model.set("measuring", {});
    const measureReq = model.requests().find((r: { method: string }) => r.method === "measure")!;
    model.emit({ kind: "mlc-response", id: measureReq.id, ok: false, error: { summary: "the measurement of step 1 was cancelled", type: "cancelled" } });
    await tick();
    expect(cancel.hidden).toBe(true);
    expect(($(".mlc-measure") as HTMLButtonElement).disabled).toBe(false);
    expect($(".mlc-banner")!.hidden).toBe(true);
    expect($('.mlc-hrow[data-step="1"] .mlc-hmeasuring')).toBeNull();
  });

  it("the CUDA view asks for the step's kernels and shows source and facts, or the unbound loops", async () => {
    const model = await mount({ history: steps, step: { id: 0, parent: null }, measurements: {}, measuring: {} });
    const sel = $(".mlc-diff-mode") as HTMLSelectElement;
    expect(Array.from(sel.options).map((o) => o.value)).toContain("cuda");
    sel.value = "cuda";
    sel.dispatchEvent(new Event("change"));
    expect($(".mlc-code")!.hidden).toBe(true);
    expect($(".mlc-cuda")!.hidden).toBe(false);
    let req = model.requests().at(-1)!;
    expect(req.method).toBe("cuda_source");
    expect(req.params).toEqual({ step: 0, ptx: true });
    model.reply(
      { summary: "the program has unbound loops: on a CUDA target they would silently run on the host.", detail: "  block 'Y' is not inside a blockIdx/threadIdx loop", type: "gpu_check" },
      false,
    );
    await tick();
    expect($(".mlc-cuda-problem")?.textContent).toContain("unbound loops");
    expect($(".mlc-cuda-problem-detail")?.textContent).toContain("block 'Y'");
    expect($(".mlc-banner")!.hidden).toBe(true); // a view, not an error banner
    // a bound step
    model.pushStep({ id: 1, parent: 0 });
    await tick();
    req = model.requests().at(-1)!;
    expect(req.params).toEqual({ step: 1, ptx: true });
    const source = 'extern "C" __global__ void main_kernel(float* A) {\n  A[threadIdx.x] = 0.0f;\n}\n';
    model.reply({ step: 1, source, kernels: [{ name: "main_kernel", threads_per_block: 128, shared_bytes: 2048, local_bytes: 0, thread_extents: { "blockIdx.x": 8, "threadIdx.x": 128 } }], ptx: ".visible .entry main_kernel()", ptx_error: null });
    await tick();
    expect($(".mlc-cuda-message")!.hidden).toBe(true);
    expect($(".mlc-cuda .cm-content")?.textContent).toContain("__global__");
    const facts = $('.mlc-cuda-kernel[data-kernel="main_kernel"]')!.textContent!;
    expect(facts).toContain("8");
    expect(facts).toContain("128");
    expect(facts).toContain("2 KiB");
    const which = $(".mlc-cuda-which") as HTMLSelectElement;
    which.value = "ptx";
    which.dispatchEvent(new Event("change"));
    expect($(".mlc-cuda .cm-content")?.textContent).toContain(".visible .entry");
    // back to step 0: cached, no new request
    const n = model.requests().length;
    model.pushStep({ id: 0, parent: null });
    await tick();
    expect(model.requests().length).toBe(n);
    expect($(".mlc-cuda-problem")?.textContent).toContain("unbound loops");
    sel.value = "off";
    sel.dispatchEvent(new Event("change"));
    expect($(".mlc-code")!.hidden).toBe(false);
    expect($(".mlc-cuda")!.hidden).toBe(true);
  });
});

describe("the roofline view of the measured steps", () => {
  it("places steps under the machine's roof and says how far below they are", async () => {
    const { roofOf, rooflinePoints, rooflinePlot, measurementTitle } = await import("../measure/measure");
    const m = (latency: number, gflops: number): Measurement => ({
      ...EMPTY_MEASUREMENT, latency_s: latency, gflops, intensity: 10.7, fraction_of_peak: gflops / 200, machine_peak_gflops: 200,
      machine_bandwidth_gbs: 10, threads: 2, cache: "warm", load: 0.3, correct: true,
    });
    const measurements = { "0": m(1e-3, 4), "1": m(1e-4, 40) };
    const roof = roofOf(measurements);
    expect(roof).toEqual({ peak_gflops: 200, bandwidth_gbs: 10 });
    const points = [
      { id: 0, label: "original", latency: 1e-3, correct: true, current: false, after: false, target: "cpu" },
      { id: 1, label: "split", latency: 1e-4, correct: true, current: true, after: false, target: "cpu" },
    ];
    const rp = rooflinePoints(points, measurements);
    expect(rp.map((p) => p.gflops)).toEqual([4, 40]);
    const svg = rooflinePlot(rp, roof)!;
    expect(svg.querySelector(".mlc-roof")).not.toBeNull();
    const dots = svg.querySelectorAll("circle.mlc-plot-point");
    expect(dots.length).toBe(2);
    expect(Number(dots[1].getAttribute("cy"))).toBeLessThan(Number(dots[0].getAttribute("cy"))); // faster is higher
    expect(dots[1].querySelector("title")!.textContent).toContain("20.0% of the roof");
    expect(rooflinePlot(rp, null)).toBeNull(); // no machine figures: no roofline
    expect(measurementTitle(m(1e-4, 40))).toContain("2 thread(s), warm cache, load 0.3");
    const busy = measurementTitle({ ...m(1e-4, 40), others_cores: 1.5, bytes_source: "footprint: every element" });
    expect(busy).toContain("busy machine: other processes used 1.50 cores");
    expect(busy).toContain("bytes: footprint");
    expect(measurementTitle({ ...m(1e-4, 40), others_cores: 0.02 })).toContain("quiet machine");
    expect(measurementTitle({ ...m(1e-4, 40), others_cores: 0.02, parallel_speed: 0.55 }))
      .toContain("shared cores: the process got 55% of its cores' speed");
    expect(measurementTitle({ ...m(1e-4, 40), others_cores: 0.02, parallel_speed: 0.97 })).not.toContain("shared cores");
    // repeats that disagree: the figure says so (interquartile range over 10% of the median)
    expect(measurementTitle({ ...m(1e-4, 40), iqr_s: 3e-5, rounds: 3 }))
      .toContain("unsteady: the repeats spread 30% of their median, the steadiest of 3 rounds");
    expect(measurementTitle({ ...m(1e-4, 40), iqr_s: 5e-6, rounds: 1 })).not.toContain("unsteady");
  });
});

describe("a measurement as the kernel sends it", () => {
  // tests/fixtures/measurement_unsteady.json is what the explorer's packer sends for an unsteady
  // measurement (tests/widgets/test_measurement_wire.py holds it to the packer): not written by hand.
  it("says unsteady when measure did, and lists the fields the contract shows on hover", () => {
    const sent: Measurement = unsteady;
    const text = measurementTitle(sent);
    expect(text).toContain("unsteady: the repeats spread 25% of their median, the steadiest of 3 rounds");
    for (const { label } of MEASUREMENT_HOVER) expect(text).toContain(`${label}: `);
    expect(text).toContain("build: 125 ms");
  });
});
