// The access panel: one heatmap per buffer (canvas + ImageData), statistics, enclosing-loop sliders,
// a scrubber that replays first touches with a fading trail, and GPU colouring / warp statistics.
// Host-agnostic: the explorer embeds it (driven by its selection) and the AccessView widget shows it
// alone; both answer the requests `access_footprint` and `access_gpu_stats`.

import { h, keepKeys } from "../lib/dom";
import { ensureStyle, isDarkTheme } from "../lib/theme";
import css from "./access.css";
import { Panel } from "../lib/panel";
import { type RpcReply, RpcFailure } from "../lib/rpc";
import { type ColorBy, PALETTE, type RGB, emptyColor, hueColor, orderColor, rgbText } from "./color";
import { type Card, MAX_1D_PX, blockText, paint, pixelBlock, resizeCard, statsTable } from "./card";
import { KeptAnswers } from "./kept";
import { type DecodedBuffer, type Footprint, type FootprintResult, type Region, type SliceMap, cropIndex, decodeFootprint, describeElement, gridOf, indexAt, launchSize, sliceMap, threadText } from "./data";

/** The view state: the standalone widget's traits of the same names (mlc_lab.model.traits.AccessViewTraits). */
export type AccessState = Pick<AccessViewTraits, "loop" | "at" | "color_by" | "warp" | "block" | "time" | "region" | "sweep_threads" | "shape_vars">;

export type PanelRequest = "access_footprint" | "access_gpu_stats" | "access_cancel";

export interface AccessHost {
  /** The panel's two requests (mlc_lab/model/requests.py), typed by the table: Rpc.call answers it. */
  request<K extends PanelRequest>(method: K, params: RequestParams[K]): Promise<RpcReply<RequestResults[K]>>;
  /** Called when the user changes the view state (the standalone widget mirrors it into traits). */
  saveState?(state: Partial<AccessState>): void;
  exportHtml?(): void;
  /** Largest side of a 2-D heatmap in CSS pixels (default 280). */
  maxPx?: number;
  /** Hear the kernel's progress of a long analysis (parts done of total; sent after a second). */
  onProgress?(cb: (done: number, total: number) => void): void;
  /** The step the panel's program is at (a step never changes): answers are kept per step and loop,
   *  so a loop analysed seconds before is shown again at once. None: nothing is kept. */
  stepKey?(): string | null;
}


// The warp statistics' types are generated from mlc_lab/model/access/payload.py (js/lib/model.ts).
import type { AccessViewTraits, FootprintParams, GpuStats as GpuStatsResult, GpuStatsParams, RequestParams, RequestResults, WarpAccess } from "../lib/model";

export type { GpuStatsResult, WarpAccess };

const MAX_2D_PX = 280;
const TRAILS: Array<[string, number]> = [
  ["no trail", 0],
  ["short trail", 0.02],
  ["trail", 0.08],
  ["long trail", 0.25],
];
const SPEEDS: Array<[string, number]> = [
  ["2 s", 2],
  ["5 s", 5],
  ["10 s", 10],
  ["30 s", 30],
];

export class AccessPanel extends Panel<[loop: string | null, at?: Record<string, number>, force?: boolean]> {
  readonly el: HTMLElement;
  private state: AccessState = { loop: "", at: {}, color_by: "access", warp: -1, block: -1, time: -1, region: "auto", sweep_threads: true, shape_vars: {} };
  private fp: Footprint | null = null;
  private cards: Card[] = [];
  private seq = 0;
  private gpuSeq = 0;
  private playing = false;
  private raf = 0;
  private trailFrac = 0.08;
  private duration = 5;
  private head: HTMLElement;
  private atHost: HTMLElement;
  private shapeHost: HTMLElement;
  private controls: HTMLElement;
  private timeBar: HTMLElement;
  private playBtn: HTMLButtonElement;
  private scrub: HTMLInputElement;
  private stepLabel: HTMLElement;
  private errorEl: HTMLElement;
  private bufHost: HTMLElement;
  private gpuHost: HTMLElement;
  private tip: HTMLElement;
  private statusEl: HTMLElement;
  private cancelBtn: HTMLButtonElement;
  private loading = false;
  private kept = new KeptAnswers<GpuStatsResult>(); // per step and loop (AccessHost.stepKey)

  constructor(private host: AccessHost) {
    super();
    if (typeof document !== "undefined") ensureStyle("mlc-lab-access-style", css);
    this.onDispose(() => this.el.remove());
    this.onDispose(() => this.stop());
    this.head = h("div", { class: "mlc-acc-head" });
    this.statusEl = h("span", { class: "mlc-acc-status" });
    this.cancelBtn = h("button", { class: "mlc-btn mlc-acc-cancel", hidden: true, title: "stop this analysis (a new step or loop stops it too)", onclick: () => void this.cancel() }, "Cancel") as HTMLButtonElement;
    host.onProgress?.((done, total) => {
      if (this.loading && total > 0) this.setStatus(`analysing… ${done} of ${total} parts`);
    });
    this.atHost = h("div", { class: "mlc-acc-at" });
    this.shapeHost = h("div", { class: "mlc-acc-shapes", hidden: true });
    this.controls = h("div", { class: "mlc-acc-controls" });
    this.playBtn = h("button", { class: "mlc-btn mlc-acc-play", title: "play the loop's iterations in execution order", onclick: () => this.togglePlay() }, "▶ Play") as HTMLButtonElement;
    this.scrub = h("input", { class: "mlc-acc-scrub", type: "range", min: "0", max: "0", value: "0", title: "step of the selected loop" }) as HTMLInputElement;
    this.scrub.addEventListener("input", () => {
      this.stop();
      this.setTime(Number(this.scrub.value), true);
    });
    this.stepLabel = h("span", { class: "mlc-acc-step" });
    const allBtn = h("button", { class: "mlc-btn mlc-acc-all", title: "show every element the loop touches", onclick: () => (this.stop(), this.setTime(-1, true)) }, "All");
    const trailSel = h("select", { class: "mlc-acc-trail", title: "how long a touched element stays bright" }) as HTMLSelectElement;
    for (const [label, f] of TRAILS) trailSel.append(h("option", { value: String(f), selected: f === this.trailFrac }, label));
    trailSel.addEventListener("change", () => {
      this.trailFrac = Number(trailSel.value);
      this.drawAll();
    });
    const speedSel = h("select", { class: "mlc-acc-speed", title: "how long playing the whole loop takes" }) as HTMLSelectElement;
    for (const [label, s] of SPEEDS) speedSel.append(h("option", { value: String(s), selected: s === this.duration }, label));
    speedSel.addEventListener("change", () => (this.duration = Number(speedSel.value)));
    this.timeBar = h("div", { class: "mlc-acc-time" }, this.playBtn, this.scrub, this.stepLabel, allBtn, trailSel, speedSel);
    this.errorEl = h("div", { class: "mlc-acc-error", hidden: true });
    this.bufHost = h("div", { class: "mlc-acc-buffers" });
    this.gpuHost = h("div", { class: "mlc-acc-gpu", hidden: true });
    this.tip = h("div", { class: "mlc-acc-tip", hidden: true });
    this.el = h(
      "div",
      { class: "mlc-access" },
      h("div", { class: "mlc-acc-top" }, this.head, this.statusEl, this.cancelBtn),
      this.atHost,
      this.shapeHost,
      this.controls,
      this.timeBar,
      this.errorEl,
      this.bufHost,
      this.gpuHost,
      this.tip,
    );
    keepKeys(this.el);
    void this.reload(); // nothing selected yet: the hint
  }

  get current(): Footprint | null {
    return this.fp;
  }

  get viewState(): AccessState {
    return { ...this.state, at: { ...this.state.at }, shape_vars: { ...this.state.shape_vars } };
  }

  // ---- state in ---------------------------------------------------------------------------------

  /** Show the footprint of `loop` (null: nothing). Enclosing values default to the last ones used. */
  show(loop: string | null, at?: Record<string, number>, force = false): Promise<void> {
    const next = loop ?? "";
    const changed = next !== this.state.loop || (at !== undefined && JSON.stringify(at) !== JSON.stringify(this.state.at));
    if (!changed && !force && (this.fp || !next)) return Promise.resolve();
    this.state.loop = next;
    if (at !== undefined) this.state.at = { ...at };
    return this.reload();
  }

  /** Apply view state from the host (standalone widget traits); reloads only when needed. */
  setState(s: Partial<AccessState>): Promise<void> {
    const needLoad =
      (s.loop !== undefined && s.loop !== this.state.loop) ||
      (s.at !== undefined && JSON.stringify(s.at) !== JSON.stringify(this.state.at)) ||
      (s.sweep_threads !== undefined && s.sweep_threads !== this.state.sweep_threads) ||
      (s.shape_vars !== undefined && JSON.stringify(s.shape_vars) !== JSON.stringify(this.state.shape_vars));
    const needGpu = (s.warp !== undefined && s.warp !== this.state.warp) || (s.block !== undefined && s.block !== this.state.block);
    Object.assign(this.state, s);
    if (needLoad) return this.reload();
    if (this.fp) {
      this.drawControls();
      if (s.region !== undefined) this.buildCards();
      else if (s.color_by !== undefined || needGpu) this.rebuildColors();
      if (s.time !== undefined) this.setTime(s.time, false);
      if (needGpu) void this.loadGpu();
    }
    return Promise.resolve();
  }

  /** Fetch again (the program changed). */
  async reload(): Promise<void> {
    const seq = ++this.seq;
    this.stop();
    if (!this.state.loop) {
      this.fp = null;
      this.cards = [];
      this.bufHost.replaceChildren(h("div", { class: "mlc-muted" }, "Select a loop to see the memory its iterations touch."));
      this.drawHead();
      this.atHost.replaceChildren();
      this.controls.replaceChildren();
      this.timeBar.hidden = true;
      this.gpuHost.hidden = true;
      this.showError(null);
      this.drawShapes([]);
      return;
    }
    const params = this.withShapes<FootprintParams>({ loop: this.state.loop, at: this.state.at, sweep_threads: this.state.sweep_threads });
    const key = KeptAnswers.key(this.host.stepKey?.(), { ...params, at: null });
    let fp = key !== null ? this.kept.footprint(key, params.at ?? {}) : undefined;
    if (!fp) {
      // Until the answer comes, the head names the loop asked about and the last picture is greyed:
      // it is the previous loop's (it said the old name for the whole analysis, 21 s under load).
      this.setStatus("analysing…");
      this.setLoading(true);
      try {
        const reply = await this.host.request("access_footprint", params);
        fp = await decodeFootprint(reply.result, reply.buffers);
      } catch (err) {
        if (seq !== this.seq || this.isDisposed) return;
        this.failed(err);
        return;
      }
      if (seq !== this.seq || this.isDisposed) return;
      // kept only when nothing moved meanwhile: then the kernel answered for the step the key names
      if (key !== null) this.kept.keepFootprint(key, fp);
    }
    this.shown(fp);
  }

  private failed(err: unknown): void {
    this.setLoading(false);
    this.setStatus("");
    this.fp = null;
    this.cards = [];
    this.bufHost.replaceChildren();
    this.timeBar.hidden = true;
    this.gpuHost.hidden = true;
    // Symbolic shapes with no values yet are a question, not a failure: the fields ask for them (the
    // kernel's sentence, written for Python, says shape_vars={...}; it was shown as a red error).
    const ask = err instanceof RpcFailure ? err.error.shape_vars ?? [] : [];
    this.showError(ask.length ? null : err);
    this.drawShapes(ask, ask.length > 0);
    this.drawHead();
  }

  private shown(fp: Footprint): void {
    this.setLoading(false);
    this.showError(null);
    this.setStatus("");
    this.fp = fp;
    this.state.at = { ...fp.at };
    if (!fp.gpu && (this.state.color_by === "thread" || this.state.color_by === "block")) this.state.color_by = "access";
    if (this.state.time >= fp.steps) this.state.time = -1;
    this.drawAt();
    this.drawShapes(Object.keys(fp.shape_vars ?? {}));
    this.drawControls();
    this.buildCards();
    this.drawHead(); // after the cards: it says how they are drawn
    this.timeBar.hidden = fp.steps <= 0;
    this.scrub.max = String(Math.max(0, fp.steps - 1));
    this.setTime(this.state.time, false);
    if (fp.gpu) void this.loadGpu();
    else this.gpuHost.hidden = true;
  }

  // ---- drawing: frame ------------------------------------------------------------------------------

  private setStatus(text: string): void {
    this.statusEl.textContent = text;
    this.el.classList.toggle("mlc-acc-loading", !!text);
  }

  /** Stop the analysis in flight: the kernel answers it "cancelled" at its next part. */
  private async cancel(): Promise<void> {
    if (!this.loading) return;
    this.setStatus("cancelling…");
    try {
      await this.host.request("access_cancel", {});
    } catch {
      // no kernel or no analysis: nothing to stop
    }
  }

  private setLoading(on: boolean): void {
    this.loading = on;
    this.cancelBtn.hidden = !on;
    // the picture, sliders and figures shown are the previous loop's until the answer comes
    this.el.classList.toggle("mlc-acc-stale", on && this.fp !== null);
    if (on) this.drawHead();
  }

  private showError(err: unknown): void {
    if (!err) {
      this.errorEl.hidden = true;
      this.errorEl.replaceChildren();
      this.el.classList.remove("mlc-acc-has-error");
      return;
    }
    const summary = err instanceof RpcFailure ? err.error.summary : err instanceof Error ? err.message : String(err);
    const detail = err instanceof RpcFailure ? err.error.detail : undefined;
    this.errorEl.hidden = false;
    this.el.classList.add("mlc-acc-has-error");
    this.errorEl.replaceChildren(
      h("span", { class: "mlc-acc-error-summary" }, summary),
      detail && detail !== summary ? h("details", {}, h("summary", {}, "details"), h("pre", {}, detail)) : "",
    );
  }

  private drawHead(): void {
    const fp = this.fp;
    if (!this.state.loop) {
      this.head.replaceChildren(h("b", {}, "Memory access"));
      return;
    }
    if (this.loading) {
      const was = fp && fp.loop.ref !== this.state.loop ? h("span", { class: "mlc-muted" }, ` · below: loop ${fp.loop.ref}, until it answers`) : "";
      this.head.replaceChildren("Analysing loop ", h("b", { class: "mlc-acc-loop" }, this.state.loop), "…", was);
      return;
    }
    const loop = fp?.loop;
    const tag = loop?.thread ? ` → ${loop.thread}` : "";
    const ext = loop?.extent ? ` (${loop.extent} iterations${tag})` : "";
    const steps = fp
      ? h(
          "span",
          { class: "mlc-muted mlc-acc-steps", title: "A step is one run of the loop's body (its innermost statement), in the order the program runs them: ▶ Play and the slider walk them one by one, and 'order of first touch' colours by them." },
          ` · ${fp.steps.toLocaleString()} steps (runs of its body, in order)`,
        )
      : "";
    const cell = this.drawnCell();
    const poolNote = cell
      ? h("span", { class: "mlc-muted mlc-acc-pooled", title: "The buffer has more elements than the heatmap has pixels: each pixel stands for a block of elements and shows the earliest-touched one. The figures (distinct elements, cache lines, reuse, strides) are exact." }, ` · drawn pooled: one pixel per ${cell} elements`)
      : "";
    this.head.replaceChildren("Memory touched by loop ", h("b", { class: "mlc-acc-loop" }, this.state.loop), ext, steps, poolNote);
  }

  /** "21×21" when a heatmap shows more than one element per pixel (the largest block any shows). */
  private drawnCell(): string | null {
    let best: [number, number] | null = null;
    for (const c of this.cards) {
      const [rows, cols] = pixelBlock(c);
      if (rows * cols > 1 && (!best || rows * cols > best[0] * best[1])) best = [rows, cols];
    }
    return best ? blockText(best) : null;
  }

  private drawAt(): void {
    const fp = this.fp!;
    if (!fp.enclosing.length) {
      this.atHost.replaceChildren(h("span", { class: "mlc-muted" }, "no enclosing loops"));
      return;
    }
    const swept = new Set(fp.swept ?? []);
    const rows = fp.enclosing.map((lp) => {
      const max = (lp.extent ?? 1) - 1 + lp.min;
      const all = swept.has(lp.ref);
      const value = h("span", { class: "mlc-acc-at-value" }, all ? "all" : String(lp.value));
      const slider = h("input", { type: "range", min: String(lp.min), max: String(max), value: String(lp.value), class: "mlc-acc-at-slider", dataset: { loop: lp.ref }, disabled: all }) as HTMLInputElement;
      slider.addEventListener("input", () => (value.textContent = slider.value));
      slider.addEventListener("change", () => this.setAt(lp.ref, Number(slider.value)));
      // A loop bound to threadIdx runs over every thread by default (a kernel's threads run together):
      // colouring by thread then shows who touches what, instead of thread 0 alone.
      const isThread = (lp.thread ?? "").startsWith("threadIdx");
      const allBox = isThread
        ? h(
            "label",
            { class: "mlc-acc-all-threads", title: "run this loop over every thread (untick to look at one thread)" },
            h("input", { type: "checkbox", class: "mlc-acc-sweep", checked: this.state.sweep_threads, onchange: (ev: Event) => this.setSweep((ev.target as HTMLInputElement).checked) }),
            " all threads",
          )
        : null;
      const title = all ? `bound to ${lp.thread}: every thread` : lp.thread ? `bound to ${lp.thread}` : "enclosing loop fixed at this value";
      return h("span", { class: "mlc-acc-at-row", title }, h("span", { class: "mlc-acc-at-name" }, lp.ref, lp.thread ? h("small", {}, ` ${lp.thread}`) : ""), slider, value, allBox);
    });
    // Moved with the keyboard, a slider is redrawn by the reload it asks for: keep its focus.
    const active = typeof document !== "undefined" ? document.activeElement : null;
    const focusedLoop = active && this.atHost.contains(active) ? (active as HTMLElement).dataset.loop : undefined;
    this.atHost.replaceChildren(h("span", { class: "mlc-acc-at-title" }, "enclosing loops at"), ...rows);
    if (focusedLoop !== undefined) rows.map((r) => r.querySelector<HTMLInputElement>("input")).find((i) => i?.dataset.loop === focusedLoop)?.focus({ preventScroll: true });
  }

  /** Request parameters with the values of symbolic shapes, when the view has any. */
  private withShapes<P extends { shape_vars?: Record<string, unknown> | null }>(params: P): P {
    return Object.keys(this.state.shape_vars).length ? { ...params, shape_vars: { ...this.state.shape_vars } } : params;
  }

  /** One number field per symbolic shape of the program (`n = T.int32()`), shown while the
   * analysis asks for their values and after, to change them. */
  private drawShapes(names: string[], asking = false): void {
    if (!names.length) {
      this.shapeHost.hidden = true;
      this.shapeHost.replaceChildren();
      return;
    }
    const inputs = names.map(
      (name) =>
        h("input", { type: "number", min: "1", step: "1", class: "mlc-acc-shape-var", dataset: { var: name }, value: name in this.state.shape_vars ? String(this.state.shape_vars[name]) : "", placeholder: "128", title: `the value of ${name}`, onkeydown: (ev: KeyboardEvent) => ev.key === "Enter" && apply() }) as HTMLInputElement,
    );
    const apply = () => {
      const values: Record<string, number> = {};
      let ok = true;
      for (const input of inputs) {
        const v = Number(input.value);
        const good = input.value.trim() !== "" && Number.isInteger(v) && v > 0;
        input.setAttribute("aria-invalid", good ? "false" : "true");
        if (good) values[input.dataset.var as string] = v;
        ok = ok && good;
      }
      if (ok) void this.setShapeVars(values);
    };
    this.shapeHost.hidden = false;
    const them = names.length > 1 ? "them values" : "it a value";
    this.shapeHost.replaceChildren(
      asking ? h("div", { class: "mlc-acc-ask" }, `This program's shapes are symbolic (${names.join(", ")}): give ${them} to draw the memory loop ${this.state.loop} touches.`) : "",
      h("span", { class: "mlc-acc-at-title" }, "symbolic shapes"),
      ...names.map((name, i) => h("label", { class: "mlc-acc-at-row" }, `${name} =`, inputs[i])),
      h("button", { class: "mlc-btn mlc-acc-shape-apply", title: "analyse with these values", onclick: apply }, "Analyse"),
    );
  }

  /** Give the program's symbolic shapes values (`{ n: 128 }`) and fetch again. */
  setShapeVars(values: Record<string, number>): Promise<void> {
    this.state.shape_vars = { ...values };
    this.host.saveState?.({ shape_vars: this.state.shape_vars });
    return this.reload();
  }

  /** Run the enclosing threadIdx loops over every thread (or fix them at `at`) and fetch again. */
  setSweep(on: boolean): Promise<void> {
    this.state.sweep_threads = on;
    this.host.saveState?.({ sweep_threads: on });
    return this.reload();
  }

  /** Fix an enclosing loop at `value` and fetch the footprint again. */
  setAt(ref: string, value: number): Promise<void> {
    this.state.at = { ...this.state.at, [ref]: value };
    this.host.saveState?.({ at: this.state.at });
    return this.reload();
  }

  private drawControls(): void {
    const fp = this.fp;
    if (!fp) return;
    const colorSel = h("select", { class: "mlc-acc-color", title: "what the colours show" }) as HTMLSelectElement;
    const modes: Array<[ColorBy, string]> = [
      ["access", "reads / writes"],
      ["order", "order of first touch"],
    ];
    if (fp.gpu) modes.push(["thread", "by thread"], ["block", "by block"]);
    for (const [v, l] of modes) colorSel.append(h("option", { value: v, selected: v === this.state.color_by }, l));
    colorSel.addEventListener("change", () => this.setColorBy(colorSel.value as ColorBy));
    const regionSel = h("select", { class: "mlc-acc-region", title: "what part of each buffer the heatmaps show" }) as HTMLSelectElement;
    for (const [v, l] of [
      ["auto", "zoom to the touched part"],
      ["touched", "touched box only"],
      ["buffer", "whole buffer"],
    ])
      regionSel.append(h("option", { value: v, selected: v === this.state.region }, l));
    regionSel.addEventListener("change", () => this.setRegion(regionSel.value as Region));
    const parts: Array<Node | string> = [colorSel, regionSel];
    if (fp.gpu) {
      const nthreads = launchSize(fp.launch, "threadIdx");
      const nblocks = launchSize(fp.launch, "blockIdx");
      const warpSel = h("select", { class: "mlc-acc-warp", title: "highlight one warp (32 threads) and show its statistics" }) as HTMLSelectElement;
      warpSel.append(h("option", { value: "-1", selected: this.state.warp < 0 }, "all warps"));
      for (let w = 0; w < Math.ceil(nthreads / 32); w++) warpSel.append(h("option", { value: String(w), selected: w === this.state.warp }, `warp ${w} (threads ${w * 32}–${Math.min(nthreads, w * 32 + 32) - 1})`));
      warpSel.addEventListener("change", () => this.pick({ warp: Number(warpSel.value) }));
      // Blocks by their (x, y) coordinates; "all blocks" rather than the -1 the traits store.
      const blockSel = h("select", { class: "mlc-acc-block", title: "highlight one thread block (the others are dimmed)" }) as HTMLSelectElement;
      blockSel.append(h("option", { value: "-1", selected: this.state.block < 0 }, "all blocks"));
      for (let b = 0; b < Math.min(nblocks, 4096); b++) blockSel.append(h("option", { value: String(b), selected: b === this.state.block }, `block ${threadText(b, fp.launch, "blockIdx")}`));
      blockSel.addEventListener("change", () => this.pick({ block: Number(blockSel.value) }));
      parts.push(warpSel, blockSel);
    }
    parts.push(h("span", { class: "mlc-spacer" }));
    parts.push(h("button", { class: "mlc-btn mlc-acc-png", title: "download the heatmaps as a PNG", onclick: () => this.downloadPng() }, "PNG"));
    if (this.host.exportHtml) parts.push(h("button", { class: "mlc-btn mlc-acc-html", title: "download a self-contained HTML snapshot", onclick: () => this.host.exportHtml?.() }, "HTML"));
    this.controls.replaceChildren(...parts, this.legend());
  }

  private legend(): HTMLElement {
    const key = (c: RGB, label: string) => h("span", { class: "mlc-acc-key" }, h("i", { style: { background: rgbText(c) } }), label);
    if (this.state.color_by === "access") return h("span", { class: "mlc-acc-legend" }, key(PALETTE.read, "read"), key(PALETTE.write, "write"), key(PALETTE.both, "both"));
    if (this.state.color_by === "order") return h("span", { class: "mlc-acc-legend" }, key(orderColor(0), "first"), key(orderColor(1), "last"));
    return h("span", { class: "mlc-acc-legend mlc-muted" }, `one colour per ${this.state.color_by}`);
  }

  setRegion(region: Region): void {
    this.state.region = region;
    this.host.saveState?.({ region });
    this.drawControls();
    this.buildCards();
    this.drawHead();
  }

  setColorBy(mode: ColorBy): void {
    this.state.color_by = mode;
    this.host.saveState?.({ color_by: mode });
    this.drawControls();
    this.rebuildColors();
  }

  pick(p: { warp?: number; block?: number }): void {
    Object.assign(this.state, p);
    this.host.saveState?.(p);
    this.drawControls();
    this.rebuildColors();
    void this.loadGpu();
  }

  // ---- drawing: heatmaps ----------------------------------------------------------------------------

  private buildCards(): void {
    const fp = this.fp;
    if (!fp) return;
    this.cards = [];
    const els: HTMLElement[] = [];
    for (const buf of fp.buffers) {
      const g = gridOf(buf.shape);
      const lead = g.lead.map((_, d) => (buf.crop.shape.length ? buf.crop.offset[d] ?? 0 : 0));
      const canvas = h("canvas", { class: "mlc-acc-canvas", dataset: { buffer: buf.buffer } }) as HTMLCanvasElement;
      const grid = h("div", { class: "mlc-acc-grid", hidden: true });
      const mini = h("canvas", { class: "mlc-acc-mini-canvas", title: "the whole buffer; click to show it all" }) as HTMLCanvasElement;
      const miniBox = h("div", { class: "mlc-acc-mini-box" });
      const range = h("div", { class: "mlc-acc-range mlc-muted" });
      const card: Card = { buf, el: h("div"), canvas, ctx: null, img: null, u32: null, slice: this.sliceOf(buf, lead), lead, base: new Uint32Array(buf.size), gathered: null, fresh: true, grid, mini, miniBox, range };
      const sliders = g.lead.map((n, d) => {
        const val = h("span", { class: "mlc-acc-at-value" }, String(lead[d]));
        const s = h("input", { type: "range", min: "0", max: String(n - 1), value: String(lead[d]), class: "mlc-acc-dim", dataset: { dim: String(d) } }) as HTMLInputElement;
        s.addEventListener("input", () => {
          card.lead[d] = Number(s.value);
          val.textContent = s.value;
          this.resizeCard(card);
          this.draw(card);
        });
        return h("label", { class: "mlc-acc-dim-row" }, `dim ${d}`, s, val);
      });
      const shapeText = buf.shape.length ? buf.shape.join("×") : "scalar";
      const title = h("div", { class: "mlc-acc-card-title" }, h("b", {}, buf.buffer), h("span", { class: "mlc-muted" }, ` ${shapeText} ${buf.dtype}${buf.scope !== "global" ? ` · ${buf.scope}` : ""}`));
      card.el = h(
        "div",
        { class: `mlc-acc-card${buf.distinct ? "" : " mlc-acc-untouched"}`, dataset: { buffer: buf.buffer } },
        title,
        // An untouched buffer is one line, not a large empty picture.
        buf.distinct ? "" : h("div", { class: "mlc-acc-untouched-note mlc-muted" }, "not touched by this loop"),
        ...sliders,
        h("div", { class: "mlc-acc-views" }, h("div", { class: "mlc-acc-canvas-box" }, canvas, grid), h("div", { class: "mlc-acc-mini", onclick: () => this.setRegion("buffer") }, mini, miniBox)),
        range,
        statsTable(buf, fp),
      );
      canvas.addEventListener("mousemove", (ev) => this.hover(card, ev));
      canvas.addEventListener("mouseleave", () => (this.tip.hidden = true));
      this.resizeCard(card);
      this.cards.push(card);
      els.push(card.el);
    }
    this.bufHost.replaceChildren(...els);
    this.rebuildColors();
  }

  /** Longest side of a heatmap in CSS pixels. */
  private maxSide(buf: DecodedBuffer): number {
    return buf.shape.length <= 1 ? MAX_1D_PX : (this.host.maxPx ?? MAX_2D_PX);
  }

  private sliceOf(buf: DecodedBuffer, lead: number[]): SliceMap {
    return sliceMap(buf.shape, buf.crop, lead, this.state.region, { maxPx: this.maxSide(buf), kind: buf.kind, first: buf.first });
  }

  private resizeCard(card: Card): void {
    resizeCard(card, this.sliceOf(card.buf, card.lead), this.maxSide(card.buf));
  }

  /** One frame of one heatmap (see card.ts, paint). */
  draw(card: Card): void {
    if (this.fp) paint(card, this.fp.steps, this.state, this.trailFrac);
  }

  /** Base colour of every crop element for the colour mode (the per-frame loop only scales it). */
  private rebuildColors(): void {
    const fp = this.fp;
    if (!fp) return;
    const mode = this.state.color_by;
    const steps = Math.max(1, fp.steps - 1);
    const pack = (c: RGB) => c[0] | (c[1] << 8) | (c[2] << 16);
    const kinds = [pack(emptyColor(isDarkTheme(this.el.ownerDocument ?? document))), pack(PALETTE.read), pack(PALETTE.write), pack(PALETTE.both)];
    const hues = new Map<number, number>();
    const hue = (id: number) => {
      let v = hues.get(id);
      if (v === undefined) hues.set(id, (v = pack(hueColor(id))));
      return v;
    };
    for (const card of this.cards) {
      const b = card.buf;
      const base = card.base;
      card.gathered = null;
      for (let i = 0; i < b.size; i++) {
        if (mode === "thread" && b.thread) base[i] = hue(Math.max(0, b.thread[i]));
        else if (mode === "block" && b.block) base[i] = hue(Math.max(0, b.block[i]));
        else if (mode === "order") base[i] = pack(orderColor(b.first[i] / steps));
        else base[i] = kinds[b.kind[i]];
      }
    }
    this.drawAll();
  }

  private drawAll(): void {
    const t0 = performance.now();
    for (const c of this.cards) this.draw(c);
    this.el.dataset.drawMs = (performance.now() - t0).toFixed(1); // time of the last frame's pixels
  }

  /** The pixels of a heatmap as the last frame drew them (for tests and snapshots). */
  pixels(buffer: string): Uint32Array | null {
    return this.cards.find((c) => c.buf.buffer === buffer)?.u32 ?? null;
  }

  // ---- time ---------------------------------------------------------------------------------------

  setTime(t: number, fromUser: boolean): void {
    const fp = this.fp;
    const steps = fp?.steps ?? 0;
    const time = t < 0 || !steps ? -1 : Math.min(steps - 1, Math.max(0, Math.round(t)));
    this.state.time = time;
    this.scrub.value = String(Math.max(0, time));
    this.el.dataset.time = String(time);
    this.stepLabel.textContent = time < 0 ? `all ${steps.toLocaleString()} steps` : `step ${time.toLocaleString()} / ${steps.toLocaleString()}`;
    this.stepLabel.title = "a step is one run of the loop's body, in the order the program runs them";
    this.drawAll();
    if (fromUser && !this.playing) this.host.saveState?.({ time });
  }

  togglePlay(): void {
    if (this.playing) this.stop();
    else this.play();
  }

  play(): void {
    const fp = this.fp;
    if (!fp || fp.steps <= 0 || this.playing) return;
    if (this.state.time < 0 || this.state.time >= fp.steps - 1) this.setTime(0, false);
    this.playing = true;
    this.playBtn.textContent = "❚❚ Pause";
    this.el.classList.add("mlc-acc-playing");
    let last = performance.now();
    let pos = this.state.time; // fractional step: a short loop plays as slowly as a long one
    const tick = (now: number) => {
      if (!this.playing || !this.fp) return;
      const perMs = fp.steps / (this.duration * 1000);
      const dt = Math.min(100, Math.max(0, now - last));
      last = now;
      pos += perMs * dt;
      const next = Math.floor(pos);
      if (next === this.state.time) {
        this.raf = requestAnimationFrame(tick);
        return;
      }
      if (next >= fp.steps - 1) {
        this.setTime(fp.steps - 1, false);
        this.stop();
        return;
      }
      this.setTime(next, false);
      this.raf = requestAnimationFrame(tick);
    };
    this.raf = requestAnimationFrame(tick);
  }

  stop(): void {
    if (!this.playing) return;
    this.playing = false;
    cancelAnimationFrame(this.raf);
    this.playBtn.textContent = "▶ Play";
    this.el.classList.remove("mlc-acc-playing");
    this.host.saveState?.({ time: this.state.time });
  }

  // ---- hover, GPU, export ---------------------------------------------------------------------------

  private hover(card: Card, ev: MouseEvent): void {
    const rect = card.canvas.getBoundingClientRect();
    if (!rect.width || !rect.height) return;
    const c = Math.floor(((ev.clientX - rect.left) / rect.width) * card.slice.cols);
    const r = Math.floor(((ev.clientY - rect.top) / rect.height) * card.slice.rows);
    if (c < 0 || r < 0 || c >= card.slice.cols || r >= card.slice.rows) return;
    const i = card.slice.map[r * card.slice.cols + c];
    const index = i >= 0 ? cropIndex(card.buf.crop, i) : indexAt(card.buf.shape, card.lead, card.slice, r, c);
    const block = pixelBlock(card);
    const pooled = block[0] * block[1] > 1 ? ` (one pixel: ${blockText(block)} elements, its earliest touch)` : "";
    this.tip.textContent = describeElement(card.buf, index, i, this.fp?.launch ?? {}) + pooled;
    this.tip.hidden = false;
    const host = this.el.getBoundingClientRect();
    this.tip.style.left = `${ev.clientX - host.left + 12}px`;
    this.tip.style.top = `${ev.clientY - host.top + 12}px`;
  }

  private async loadGpu(): Promise<void> {
    const fp = this.fp;
    if (!fp || !fp.gpu) return;
    const seq = ++this.gpuSeq;
    const params: GpuStatsParams = { loop: this.state.loop, at: this.state.at };
    if (this.state.warp >= 0) params.warp = this.state.warp;
    if (this.state.block >= 0) params.block = this.state.block;
    const key = KeptAnswers.key(this.host.stepKey?.(), this.withShapes(params));
    const kept = key !== null ? this.kept.gpuStats(key) : undefined;
    if (kept) {
      this.drawGpu(kept);
      return;
    }
    try {
      const reply = await this.host.request("access_gpu_stats", this.withShapes(params));
      if (key !== null) this.kept.keepGpuStats(key, reply.result);
      if (seq !== this.gpuSeq || this.isDisposed) return;
      this.drawGpu(reply.result);
    } catch (err) {
      if (seq !== this.gpuSeq || this.isDisposed) return;
      const summary = err instanceof RpcFailure ? err.error.summary : String(err);
      this.gpuHost.hidden = false;
      this.gpuHost.replaceChildren(h("div", { class: "mlc-acc-gpu-error mlc-muted" }, summary));
    }
  }

  private drawGpu(g: GpuStatsResult): void {
    const num = (v: number | null | undefined, digits = 2) => (v === undefined || v === null ? "–" : Number.isInteger(v) ? String(v) : v.toFixed(digits));
    const head = ["buffer", "block", "access", "scope", "index", "requests", "sectors/req", "sector eff.", "wavefronts", "bank conflicts", "n-way"];
    const tips = [
      "",
      "the block (sblock) issuing the access",
      "",
      "memory space",
      "index expression",
      "warp-level requests (instructions) over the loop",
      "global/local: 32-byte sectors per request (ideal: 4 for 32 threads × 4 bytes)",
      "bytes asked for / bytes of the sectors moved",
      "shared: wavefronts (passes over the 32 banks) needed",
      "shared: extra wavefronts caused by bank conflicts",
      "worst n-way bank conflict in a request (mean)",
    ];
    const rows = g.accesses.map((a) =>
      h(
        "tr",
        { class: `mlc-acc-gpu-row${(a.bank_conflicts ?? 0) > 0 || (a.efficiency != null && a.efficiency < 0.5) ? " mlc-acc-bad" : ""}`, dataset: { buffer: a.buffer } },
        ...[a.buffer, a.block, a.kind, a.scope, a.index, num(a.requests), num(a.sectors_per_request), a.efficiency == null ? "–" : `${Math.round(a.efficiency * 100)}%`, num(a.wavefronts), num(a.bank_conflicts), num(a.ways)].map((v) => h("td", {}, String(v))),
      ),
    );
    const threads = g.threads.length ? `threads ${g.threads[0]}–${g.threads[g.threads.length - 1]}` : "";
    this.gpuHost.hidden = false;
    this.gpuHost.replaceChildren(
      h("div", { class: "mlc-acc-gpu-title" }, h("b", {}, `Warp ${g.warp}`), ` (${threads}) — memory requests as Nsight Compute counts them, computed without a GPU`),
      h("table", { class: "mlc-acc-gpu-table" }, h("tr", {}, ...head.map((x, i) => h("th", { title: tips[i] }, x))), ...rows),
    );
  }

  /** All heatmaps with their names in one PNG (data URL). */
  snapshotPng(): string | null {
    if (!this.cards.length || typeof document === "undefined") return null;
    const pad = 10;
    const sizes = this.cards.map((c) => ({ w: parseFloat(c.canvas.style.width) || c.canvas.width, h: parseFloat(c.canvas.style.height) || c.canvas.height }));
    const width = Math.max(200, ...sizes.map((s) => s.w + 2 * pad));
    const height = sizes.reduce((a, s) => a + s.h + 22 + pad, pad);
    const out = document.createElement("canvas");
    out.width = Math.ceil(width);
    out.height = Math.ceil(height);
    const ctx = out.getContext("2d");
    if (!ctx) return null;
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, out.width, out.height);
    ctx.imageSmoothingEnabled = false;
    let y = pad;
    this.cards.forEach((c, k) => {
      ctx.fillStyle = "#222";
      ctx.font = "13px sans-serif";
      ctx.fillText(`${c.buf.buffer} ${c.buf.shape.join("×")} — loop ${this.state.loop}${this.state.time >= 0 ? `, step ${this.state.time}` : ""}`, pad, y + 14);
      y += 22;
      ctx.drawImage(c.canvas, pad, y, sizes[k].w, sizes[k].h);
      y += sizes[k].h + pad;
    });
    return out.toDataURL("image/png");
  }

  private downloadPng(): void {
    const url = this.snapshotPng();
    if (!url) return;
    const a = h("a", { href: url, download: `access_${this.state.loop.replace(/[^\w-]+/g, "_")}.png`, style: { display: "none" } });
    document.body.append(a);
    a.click();
    a.remove();
  }
}
