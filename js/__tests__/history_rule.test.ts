// @vitest-environment jsdom
// Redo goes to the child visited last, on the page as in the Session: the walk of
// fixtures/history_walk.json is driven through the explorer's view here (new steps arrive from
// Python, undo/redo/go to are clicks the page answers) and through the real Session in
// tests/unit/test_history_rule.py; both must reach the same step after every move.
import { afterEach, describe, expect, it } from "vitest";
import widget from "../explorer";
import { History, sameDecisions, sameStep } from "../explorer/state";
import { FOLLOW } from "../lib/model"; // declared beside the requests (mlc_lab/model/requests.py)
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

describe("steps are compared by id", () => {
  it("one id is one step, whatever its parts; decisions are compared by value", () => {
    expect(sameStep({ id: 3 }, { id: 3 })).toBe(true);
    expect(sameStep({ id: 3 }, { id: 4 })).toBe(false);
    const d = { index: 0, position: 1, kind: "SamplePerfectTile", value: [4, 8], choices: null, loop: "i", extent: 32 };
    expect(sameDecisions([d], [{ ...d, value: [4, 8] }])).toBe(true);
    expect(sameDecisions([d], [{ extent: 32, loop: "i", choices: null, kind: "SamplePerfectTile", position: 1, index: 0, value: [4, 8] }])).toBe(true);
    expect(sameDecisions([d], [{ ...d, value: [8, 4] }])).toBe(false);
    expect(sameDecisions([d], [{ ...d, value: [4, 8, 1] }])).toBe(false);
    expect(sameDecisions([d], [{ ...d, choices: [] }])).toBe(false);
    expect(sameDecisions([d], [])).toBe(false);
  });

  it("the same step sent again redraws nothing", async () => {
    const model = fakeModel();
    ({ el, dispose } = await render(widget, model));
    model.pushHistory([{ id: 1, parent: 0, kind: "apply", primitive: "p", label: "step 1" }], 1);
    model.pushStep({ id: 1, parent: 0, label: "step 1", script: "script of 1" });
    await tick();
    const tree = el.querySelector(".mlc-tree")!.innerHTML;
    const code = el.querySelector(".cm-content")?.textContent;
    model.pushStep({ id: 1, script: "not what step 1 reads" }); // a step never changes: the id decides
    await tick();
    expect(el.querySelector(".mlc-tree")!.innerHTML).toBe(tree);
    expect(el.querySelector(".cm-content")?.textContent).toBe(code);
    expect(code).toContain("script of 1");
  });
});
