// @vitest-environment jsdom
// The explorer as a student uses it inside a notebook: forms answer Enter and Escape, keys pressed
// in a view never reach the notebook around it, a moved knob keeps the focus.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import widget from "../explorer";
import { submitsOnEnter } from "../explorer/forms";
import { applicable } from "../explorer/primitives";
import { TreeIndex } from "../explorer/tree";
import { block, fakeModel, loop, mmRelu, render, tick } from "./fixtures";

let model: ReturnType<typeof fakeModel>;
let el: HTMLElement;
let outside: string[];
let dispose = () => {};

const $ = (sel: string) => el.querySelector<HTMLElement>(sel);
const row = (kind: string, name: string) => $(`.mlc-row[data-kind="${kind}"][data-name="${name}"]`)!;
const press = (target: Element, key: string, extra: KeyboardEventInit = {}) =>
  target.dispatchEvent(new KeyboardEvent("keydown", { key, bubbles: true, cancelable: true, ...extra }));

beforeEach(async () => {
  model = fakeModel();
  outside = [];
  // What a notebook (Lumino listens on the document, bubbling) would see of our keys.
  document.addEventListener("keydown", record);
  ({ el, dispose } = await render(widget, model));
});
afterEach(() => {
  document.removeEventListener("keydown", record);
  dispose();
});
function record(ev: KeyboardEvent) {
  outside.push(`${ev.ctrlKey ? "Ctrl+" : ""}${ev.key}`);
}

async function openSplit() {
  row("loop", "Y/j").click();
  await tick();
  press($(".mlc-explorer")!, "s");
  return $(".mlc-form[data-primitive='split']")!;
}

describe("forms in a notebook", () => {
  it("Enter in a factor field applies the form", async () => {
    const form = await openSplit();
    const inputs = form.querySelectorAll<HTMLInputElement>(".mlc-factor");
    inputs[1].value = "8";
    inputs[1].dispatchEvent(new Event("input"));
    const handled = !press(inputs[1], "Enter");
    expect(handled).toBe(true); // default prevented: no second, implicit submission
    expect(model.requests().at(-1)).toMatchObject({ method: "apply", params: { primitive: "split", kwargs: { loop: "Y/j", factors: [null, 8] } } });
  });

  it("Enter on an invalid form applies nothing", async () => {
    const form = await openSplit();
    const inputs = form.querySelectorAll<HTMLInputElement>(".mlc-factor");
    for (const i of [0, 1]) {
      inputs[i].value = "2";
      inputs[i].dispatchEvent(new Event("input"));
    }
    press(inputs[1], "Enter");
    expect(model.requests().filter((r) => r.method === "apply")).toEqual([]);
  });

  it("Enter in a select applies too (browsers never submit from a select)", async () => {
    row("block", "C").click();
    await tick();
    ($(".mlc-prim[data-primitive='reverse_compute_at']") as HTMLButtonElement).click();
    const select = $(".mlc-form select.mlc-choice") as HTMLSelectElement;
    select.value = "Y/j";
    select.dispatchEvent(new Event("change"));
    press(select, "Enter");
    expect(model.requests().at(-1)).toMatchObject({ method: "apply", params: { primitive: "reverse_compute_at", kwargs: { block: "C", loop: "Y/j" } } });
  });

  it("Escape cancels the form and keeps the focus in the explorer", async () => {
    const form = await openSplit();
    const input = form.querySelector<HTMLInputElement>(".mlc-factor")!;
    input.focus();
    press(input, "Escape");
    expect($(".mlc-form")).toBeNull();
    expect(model.requests().filter((r) => r.method === "apply")).toEqual([]);
    expect(el.contains(document.activeElement)).toBe(true);
  });

  it("which targets submit on Enter", () => {
    const mk = (tag: string, type?: string) => Object.assign(document.createElement(tag), type ? { type } : {});
    expect(submitsOnEnter(mk("input", "number"))).toBe(true);
    expect(submitsOnEnter(mk("input", "text"))).toBe(true);
    expect(submitsOnEnter(mk("select"))).toBe(true);
    expect(submitsOnEnter(mk("button"))).toBe(false);
    expect(submitsOnEnter(mk("input", "button"))).toBe(false);
    expect(submitsOnEnter(mk("li"))).toBe(false);
    expect(submitsOnEnter(Object.assign(mk("li"), { className: "mlc-order-item" }))).toBe(true);
    expect(submitsOnEnter(null)).toBe(false);
  });

  it("s puts the focus in the factor field: typing 4 sets the factor, not the number of loops", async () => {
    const form = await openSplit();
    const active = document.activeElement as HTMLInputElement;
    expect(active.classList.contains("mlc-factor")).toBe(true);
    expect(active).toBe(form.querySelector(".mlc-factor.mlc-focused"));
    expect(active.selectionStart === 0 || active.type === "number").toBe(true); // its text selected: a key replaces it
    expect(form.querySelector<HTMLSelectElement>(".mlc-parts")!.value).toBe("2");
  });

  it("Enter on a focused reorder row applies the reorder", async () => {
    row("loop", "Y/i").click();
    await tick();
    press($(".mlc-explorer")!, "r");
    const item = $(".mlc-form .mlc-order-item")!;
    item.focus();
    expect(!press(item, "Enter")).toBe(true);
    expect(model.requests().at(-1)).toMatchObject({ method: "apply", params: { primitive: "reorder" } });
  });

  it("a double-click on Apply sends one apply", async () => {
    const form = await openSplit();
    const apply = form.querySelector<HTMLButtonElement>(".mlc-apply")!;
    apply.click();
    apply.click(); // the first is still on its way
    press(document.activeElement ?? $(".mlc-explorer")!, "Enter");
    expect(model.requests().filter((r) => r.method === "apply")).toHaveLength(1);
  });

  it("p pressed again while parallel is on its way sends one apply", async () => {
    row("loop", "Y/i").click();
    await tick();
    for (let i = 0; i < 5; i++) press($(".mlc-explorer")!, "p");
    expect(model.requests().filter((r) => r.method === "apply")).toHaveLength(1);
  });
});

describe("keys stay in the view", () => {
  it("no key pressed inside the explorer reaches the notebook; chords with Ctrl do", async () => {
    const form = await openSplit();
    const input = form.querySelector<HTMLInputElement>(".mlc-factor")!;
    for (const k of ["ArrowRight", "ArrowDown", "a", "b", "Enter", "Escape"]) press(input, k);
    press($(".mlc-explorer")!, "x"); // no meaning to the explorer: still not the notebook's
    expect(outside).toEqual([]);
    press($(".mlc-explorer")!, "s", { ctrlKey: true }); // Ctrl+S saves the notebook
    expect(outside).toEqual(["Ctrl+s"]);
  });

  it("the trace knobs keep their keys and their focus across the redraw a change causes", async () => {
    const decisions = (value: number[]) => [{ index: 0, position: 1, kind: "SamplePerfectTile", value, choices: [[128, 1], [64, 2], [32, 4], [16, 8]], loop: "k", extent: 128 }];
    model.pushStep({ id: 1, parent: 0, decisions: decisions([32, 4]) });
    await tick();
    ($(".mlc-tab-trace") as HTMLButtonElement).click();
    const slider = $(".mlc-knob-slider") as HTMLInputElement;
    slider.focus();
    press(slider, "ArrowRight");
    expect(outside).toEqual([]);
    slider.value = "3"; // what the browser's default action does
    slider.dispatchEvent(new Event("change"));
    expect(model.requests().at(-1)).toMatchObject({ method: "set_decision", params: { index: 0, value: [16, 8] } });
    model.pushStep({ id: 2, parent: 0, decisions: decisions([16, 8]) }); // Python's answer (a new step) redraws the knobs
    await tick();
    const redrawn = $(".mlc-knob-slider") as HTMLInputElement;
    expect(redrawn).not.toBe(slider);
    expect(redrawn.value).toBe("3");
    expect(document.activeElement).toBe(redrawn);
  });
});

describe("only applicable primitives are offered", () => {
  it("after decompose_reduction, k (over Y_update) still offers neither vectorize nor parallel", () => {
    const update = block("Y_update", ["spatial", "spatial", "reduce"], { has_init: false });
    const init = block("Y_init", ["spatial", "spatial"]);
    const tree = mmRelu();
    (tree.functions[0].children[0] as any).children[0].children = [init, loop("k", 128, [update])];
    const idx = new TreeIndex(tree);
    const names = applicable(idx.findName("k"), idx).map((o) => o.spec.name);
    expect(names).not.toContain("vectorize");
    expect(names).not.toContain("parallel");
    expect(names).toContain("unroll");
  });
});

describe("diffs", () => {
  it("diff bases: the path back (parent first), then the other steps as the History lists them", async () => {
    const { diffBaseGroups } = await import("../explorer/history");
    // 0 -> 1 -> 2 -> 4, and a branch 0 -> 3 -> 5; the current step is 4
    const steps = [
      { id: 0, parent: null, children: [1, 3], primitive: "", label: "original program" },
      { id: 1, parent: 0, children: [2], primitive: "split", label: "split" },
      { id: 2, parent: 1, children: [4], primitive: "reorder", label: "reorder" },
      { id: 3, parent: 0, children: [5], primitive: "parallel", label: "parallel" },
      { id: 4, parent: 2, children: [], primitive: "fuse", label: "fuse" },
      { id: 5, parent: 3, children: [], primitive: "unroll", label: "unroll" },
    ];
    const g = diffBaseGroups(steps as any, 4);
    expect(g.path.map((s) => s.id)).toEqual([2, 1, 0]);
    expect(g.others.map((s) => s.id)).toEqual([3, 5]);
    expect(diffBaseGroups(steps as any, 3).others.map((s) => s.id)).toEqual([1, 2, 4, 5]);
  });

  it("lines that only changed indentation are not changes", async () => {
    const { indentInsensitiveDiff, alignLines } = await import("../explorer/line_diff");
    const a = "for i in range(4):\n    x = 1\n    y = 2\nz = 3\n";
    const b = "for i in range(4):\n    for j in range(2):\n        x = 1\n        y = 2\nz = 3\n";
    const changes = indentInsensitiveDiff(a, b);
    const inserted = changes.map((c) => b.slice(c.fromB, c.toB)).join("");
    expect(inserted).toContain("for j in range(2):");
    expect(inserted).not.toContain("x = 1"); // re-indented, not changed
    expect(changes.every((c) => a.slice(c.fromA, c.toA).trim() === "")).toBe(true); // nothing of a removed
    expect(alignLines(["a", "b", "c"], ["a", "x", "c"])).toEqual([
      [0, 0],
      [2, 2],
    ]);
    // a real edit inside a moved line is still one
    const c2 = indentInsensitiveDiff("  x = 1\n", "    x = 2\n");
    expect(c2.length).toBeGreaterThan(0);
    expect(indentInsensitiveDiff(a, a)).toEqual([]);
  });
});

describe("open in a side panel", () => {
  it("is offered only where the page offers it, and asks by a bubbling event", async () => {
    const { OPEN_SIDE_PANEL, setHostOffer } = await import("../lib/host");
    const side = () => $(".mlc-side-panel")!;
    await new Promise((r) => setTimeout(r, 0));
    expect(side().hidden).toBe(true); // no JupyterLab extension on this page
    const asked: EventTarget[] = [];
    const listen = (ev: Event) => asked.push(ev.target!);
    document.addEventListener(OPEN_SIDE_PANEL, listen);
    setHostOffer({ canOpenSidePanel: (node) => node.isConnected && node.classList.contains("mlc-explorer") });
    try {
      $(".mlc-explorer")!.dispatchEvent(new Event("pointerenter"));
      expect(side().hidden).toBe(false);
      side().click();
      expect(asked).toEqual([$(".mlc-explorer")]);
      setHostOffer({ canOpenSidePanel: () => false }); // e.g. already in a side panel
      $(".mlc-explorer")!.dispatchEvent(new Event("pointerenter"));
      expect(side().hidden).toBe(true);
    } finally {
      setHostOffer(null);
      document.removeEventListener(OPEN_SIDE_PANEL, listen);
    }
  });
});
