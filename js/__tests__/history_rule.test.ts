// @vitest-environment jsdom
// Redo goes to the child visited last, on the page as in the Session: the walk of
// fixtures/history_walk.json is driven through the explorer's view here (new steps arrive from
// Python, undo/redo/go to are clicks the page answers) and through the real Session in
// tests/unit/test_history_rule.py; both must reach the same step after every move.
import { afterEach, describe, expect, it } from "vitest";
import widget from "../explorer";
import { History } from "../explorer/state";
import { FOLLOW } from "../explorer/view";
import { fakeModel, render, tick } from "./fixtures";
import walkFile from "./fixtures/history_walk.json";

interface Move {
  op: "apply" | "undo" | "redo" | "goto";
  step?: number;
  current: number;
  parent?: number;
}
const walk = (walkFile as { walk: Move[] }).walk;

let dispose = () => {};
let el: HTMLElement;
afterEach(() => {
  dispose();
});

describe("redo goes where the Session's redo goes", () => {
  it("drives the recorded walk through the view", async () => {
    const model = fakeModel();
    ({ el, dispose } = await render(widget, model));
    const shown = () => JSON.parse(new TextDecoder().decode(model.state.step as DataView)).id as number;
    let made = 0;
    const reached: number[] = [];
    for (const move of walk) {
      if (move.op === "apply") {
        made += 1; // Python sends the new step and its history delta in one message
        model.pushHistory([{ id: made, parent: move.parent!, kind: "apply", primitive: "p", label: `step ${made}` }], made);
        model.pushStep({ id: made, parent: move.parent!, label: `step ${made}`, script: `script of ${made}` });
      } else if (move.op === "goto") el.querySelector<HTMLElement>(`.mlc-hrow[data-step='${move.step}']`)!.click();
      else el.querySelector<HTMLElement>(`.mlc-${move.op}`)!.click();
      await tick();
      await tick();
      reached.push(shown());
    }
    expect(reached).toEqual(walk.map((m) => m.current));
    // every move was answered by the page; the kernel was only told where the page went
    expect(model.requests()).toEqual([]);
    const notes = model.send.mock.calls.map((c: any[]) => c[0]).filter((m: any) => m?.kind === FOLLOW);
    expect(notes.length).toBe(walk.filter((m) => m.op !== "apply").length);
  });

  it("after a reload, starts from where the Session says redo goes", () => {
    const h = new History();
    const steps = [0, 1, 2].map((id) => ({ id, parent: id ? 0 : null, kind: "apply", primitive: null, label: "" }));
    h.apply({ from: 0, steps } as never);
    expect(h.redoTarget(0)).toBe(2); // the newest child, when nothing was visited
    h.apply({ from: 0, steps, visited: { "0": 1 } } as never);
    expect(h.redoTarget(0)).toBe(1);
  });
});
