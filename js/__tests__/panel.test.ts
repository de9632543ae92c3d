// @vitest-environment jsdom
// The panels' one base (lib/panel.ts): show, select, dispose; what a panel makes ends with it.
import { describe, expect, it } from "vitest";
import { AccessPanel } from "../access/panel";
import { TracePanel } from "../explorer/trace";
import { Panel } from "../lib/panel";
import { CompilerPanel } from "../lowering/compiler";
import { CudaPanel } from "../lowering/cuda";
import widget from "../explorer";
import { eventModel, fakeModel, render } from "./fixtures";

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
