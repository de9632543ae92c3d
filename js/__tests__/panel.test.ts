// @vitest-environment jsdom
// The panels' one base (lib/panel.ts): show, select, dispose; what a panel makes ends with it.
import { afterEach, describe, expect, it, vi } from "vitest";
import { AccessPanel } from "../access/panel";
import { ChecksPanel } from "../checks/panel";
import { HistoryPane } from "../explorer/history_pane";
import { TracePanel } from "../explorer/trace";
import { markKernel, recordKey } from "../lib/offline";
import { Panel } from "../lib/panel";
import { CompilerPanel } from "../lowering/compiler";
import { CudaPanel } from "../lowering/cuda";
import { WayPanel } from "../path/panel";
import widget from "../explorer";
import { eventModel, fakeModel, render, tick } from "./fixtures";

class Probe extends Panel<[what: string]> {
  readonly el = document.createElement("div");
  readonly log: string[] = [];
  constructor() {
    super();
    this.onDispose(() => this.log.push("first made"));
    this.onDispose(() => this.log.push("last made"));
  }
  show(what: string): void {
    this.log.push(`show ${what}`);
  }
}

describe("the panel base", () => {
  it("ends what a panel made once, the last made first; a late end runs at once", () => {
    const p = new Probe();
    p.show("step 1");
    p.select("i"); // a panel that does not mark the selection has nothing to do
    expect(p.isDisposed).toBe(false);
    p.dispose();
    p.dispose();
    expect(p.log).toEqual(["show step 1", "last made", "first made"]);
    expect(p.isDisposed).toBe(true);
    (p as unknown as { onDispose(end: () => void): void }).onDispose(() => p.log.push("made after the end"));
    expect(p.log.at(-1)).toBe("made after the end");
  });

  it("every panel of the explorer is one, and its dispose leaves no listener on the model", () => {
    const model = eventModel({ compiler_target: "cpu" });
    const panels: Panel<never>[] = [
      new CudaPanel(model as never),
      new CompilerPanel(model as never),
      new TracePanel({ replay() {}, setDecision() {}, exportTrace() {}, importTrace() {} }),
      new AccessPanel({ request: () => new Promise(() => {}), stepKey: () => "0" }),
    ];
    expect(model.handlerCount()).toBeGreaterThan(0); // their Rpcs and the compiler's target listen
    for (const p of panels) {
      expect(p).toBeInstanceOf(Panel);
      p.dispose();
      expect(p.isDisposed).toBe(true);
    }
    expect(model.handlerCount()).toBe(0);
  });

  it("closing the explorer disposes its panels", async () => {
    const model = fakeModel();
    const { dispose } = await render(widget, model);
    const before = model.handlerCount();
    expect(before).toBeGreaterThan(0);
    dispose();
    expect(model.handlerCount()).toBe(0);
  });
});

/** A promise and the function that resolves it (an answer that arrives when the test says). */
function later<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** A saved record of a request's answer, as the widget manager hands it back. */
const record = (result: unknown) => ({ get: (k: string) => ({ result: JSON.stringify(result), ok: true, buffers: [], encoding: "" })[k as "ok"] });

describe("the explorer's panes on the panel base: dispose stops what they started", () => {
  afterEach(() => vi.unstubAllGlobals());

  it("the Way panel takes its listeners off, and a way recorded for a saved view that arrives after its end is not drawn", async () => {
    const answer = later<unknown>();
    const model = eventModel({ path_setup: { available: true, name: "Target", source: "program", gpu: false }, path: {}, _mlc_recorded: { [recordKey("path", { step: 1 })]: "IPY_MODEL_w1" } });
    model.widget_manager.get_model.mockImplementation(() => answer.promise);
    markKernel(model, () => false);
    const host = { openForm() {}, goTo() {}, showWay() {}, label: () => undefined, tree: () => ({}) as never };
    const way = new WayPanel(model as never, host);
    expect(way).toBeInstanceOf(Panel);
    expect(model.handlerCount()).toBe(2); // it keeps the way from each step it is sent
    way.show(1);
    expect(way.now.state).toBe("pending");
    way.dispose();
    expect(model.handlerCount()).toBe(0);
    const at = { start: 1, steps: [], status: "equal", undo_to: null, why: "", trace: "", renamed: {}, seconds: 0.1 };
    answer.resolve(record({ step: 1, answer: at, hint: null, ms: 5 }));
    await tick();
    await tick();
    expect(way.now.state).toBe("pending"); // a live panel would now say "At the target"
  });

  it("the Checks panel draws no report that a saved view hands it after its end", async () => {
    const recorded = later<null | { step: number; target: "cpu"; checks: never[]; hazards: never[] }>();
    const panel = new ChecksPanel({ pick() {}, recorded: () => recorded.promise as never });
    expect(panel).toBeInstanceOf(Panel);
    const setup = { available: true, title: null, target: "cpu", names: null, tasks: [] };
    panel.show({ setup: setup as never, report: null, step: 1, live: false });
    expect(panel.report).toBeNull();
    const drawn = panel.el.innerHTML;
    panel.dispose();
    recorded.resolve({ step: 1, target: "cpu", checks: [], hazards: [] });
    await tick();
    await tick();
    expect(panel.report).toBeNull();
    expect(panel.el.innerHTML).toBe(drawn); // a live panel would now show step 1's report
  });

  it("the History pane stops following its height: the observer is disconnected and a late frame does nothing", () => {
    const observers: Array<{ disconnected: boolean; fire: () => void }> = [];
    vi.stubGlobal(
      "ResizeObserver",
      class {
        disconnected = false;
        constructor(readonly cb: () => void) {
          observers.push(this as never);
        }
        fire = () => this.cb();
        observe() {}
        disconnect() {
          this.disconnected = true;
        }
      },
    );
    const frames: FrameRequestCallback[] = [];
    vi.stubGlobal("requestAnimationFrame", (cb: FrameRequestCallback) => frames.push(cb));
    const model = eventModel({ measurements: { "0": { latency_s: 0.001 } }, failures: [] });
    const pane = new HistoryPane(model as never, { steps: () => [{ id: 0, parent: null, label: "original program" }] as never, current: () => 0, moveTo() {}, inspect() {} });
    expect(pane).toBeInstanceOf(Panel);
    const drawPlot = vi.spyOn(pane, "drawPlot");
    expect(observers).toHaveLength(1);
    let height = 500;
    Object.defineProperty(pane.el, "clientHeight", { get: () => height });
    observers[0].fire();
    frames.shift()!(0);
    expect(drawPlot).toHaveBeenCalledTimes(1); // live: a pane that gets a height draws its plot for it
    height = 200; // short now: a live pane would fold its plot
    observers[0].fire(); // a resize whose frame comes after the end
    pane.dispose();
    expect(observers[0].disconnected).toBe(true);
    frames.shift()!(0);
    expect(drawPlot).toHaveBeenCalledTimes(1);
  });

  it("the explorer ends its Way, Checks and History panes with the others", async () => {
    const model = fakeModel({ path_setup: { available: true, name: "Target", source: "program", gpu: false }, path: {} });
    const ends = [WayPanel, ChecksPanel, HistoryPane].map((cls) => vi.spyOn(cls.prototype, "dispose"));
    const { dispose } = await render(widget, model);
    dispose();
    expect(ends.map((e) => e.mock.calls.length)).toEqual([1, 1, 1]);
    expect(model.handlerCount()).toBe(0);
  });
});
