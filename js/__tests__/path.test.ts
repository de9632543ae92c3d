// @vitest-environment jsdom
// The explorer's way to a target program (js/path/): the hint as a filled-in form (fill.ts), what the
// bar says (panel.ts), and the bar, the Hint, the Way tab and the way back driven through the explorer
// view with a fake model as Python (mlc_lab/widgets/path.py) sets its traits.
import { afterEach, describe, expect, it } from "vitest";
import widget from "../explorer";
import { TreeIndex } from "../explorer/tree";
import { buildCall } from "../explorer/primitives";
import { hintForm, hintedCall, sameCall, stepCall } from "../path/fill";
import { type StepPath, wayBadge, wayStatus } from "../path/panel";
import type { PathAnswer, PathStep } from "../lib/model";
import { markKernel, recordKey } from "../lib/offline";
import { fakeModel, loop, mmRelu, render, tick } from "./fixtures";

const step = (primitive: string, args: Record<string, unknown>, reason = "the target needs it", label = `${primitive}(…)`): PathStep => ({ primitive, arguments: args, reason, label });

function answer(steps: PathStep[], extra: Partial<PathAnswer> = {}): PathAnswer {
  return { status: "reached", steps, trace: "def apply_trace(sch):\n  pass", why: "", seconds: 0.1, start: 1, undo_to: null, renamed: {}, ...extra };
}

function way(at: number, steps: PathStep[], extra: Partial<PathAnswer> = {}): StepPath {
  const a = answer(steps, { start: at, ...extra });
  const first = a.steps[0] ?? null;
  const sentence = first ? `${first.label}: ${first.reason}` : a.why || "the program is the target";
  return { step: at, ms: 120, answer: a, hint: { step: first, sentence, remaining: a.steps.length, status: a.status, undo_to: a.undo_to } };
}

const SPLIT = step("split", { loop: "Y/j", factors: [16, 8] }, "split j into 16 x 8: the target's inner j runs 8 and is vectorized", "split(Y/j, factors=[16, 8])");
const PARALLEL = step("parallel", { loop: "Y/i" }, "the target's loop i0 is parallel", "parallel(Y/i)");

describe("a hint as a filled-in form", () => {
  const tree = new TreeIndex(mmRelu());

  it("the call of a step: reorder's and fuse's loops are positional, as PathStep.call gives them", () => {
    expect(stepCall(step("reorder", { ordered_loops: ["k", "Y/j"] }))).toEqual({ primitive: "reorder", args: ["k", "Y/j"], kwargs: {} });
    expect(stepCall(step("fuse", { loops: ["Y/i", "Y/j"] }))).toEqual({ primitive: "fuse", args: ["Y/i", "Y/j"], kwargs: {} });
    expect(stepCall(SPLIT)).toEqual({ primitive: "split", args: [], kwargs: { loop: "Y/j", factors: [16, 8] } });
  });

  it("split: the loop's own form, on that loop, with the hint's factors; Apply makes the hint's call", () => {
    const f = hintForm(SPLIT, tree);
    expect(f.own).toBe(true);
    expect(f.offer.spec.name).toBe("split");
    expect(f.entry?.ref).toBe("Y/j");
    expect(f.values.factors).toEqual([16, 8]);
    expect(buildCall(f.offer.spec, f.entry!, f.values)).toEqual({ primitive: "split", args: [], kwargs: { loop: "Y/j", factors: [16, 8] } });
  });

  it("split past its loop (TVM's own way has one): the split form refuses it, so the hint offers its call, on that loop", () => {
    const past = step("split", { loop: "Y/j", factors: [null, 256] }, "the target's threads run 256", "split(Y/j, factors=[None, 256])");
    const f = hintForm(past, tree);
    expect(f.own).toBe(false);
    expect(f.entry?.ref).toBe("Y/j");
    expect(hintedCall(f, {})).toEqual({ primitive: "split", args: [], kwargs: { loop: "Y/j", factors: [null, 256] } });
    expect(f.offer.spec.help).toContain("larger than the loop");
    expect(hintForm(step("split", { loop: "Y/j", factors: [null, 128] }), tree).own).toBe(true); // at the loop's extent: its own form
  });

  it("reorder of some loops of a chain: the form's whole chain in the order that makes the same nest", () => {
    const f = hintForm(step("reorder", { ordered_loops: ["k", "Y/j"] }), tree);
    expect(f.offer.spec.name).toBe("reorder");
    expect(f.values.ordered_loops).toEqual(["Y/i", "k", "Y/j"]);
    // loops that are not one chain: no form of the explorer's makes it; the call itself is offered
    // Apply sends the hint's own reorder (the history labels it as the hint did); changed, the form's
    expect(hintedCall(f, { ...f.values })).toEqual({ primitive: "reorder", args: ["k", "Y/j"], kwargs: {} });
    expect(hintedCall(f, { ordered_loops: ["k", "Y/i", "Y/j"] })).toEqual({ primitive: "reorder", args: ["k", "Y/i", "Y/j"], kwargs: {} });
    const apart = hintForm(step("reorder", { ordered_loops: ["k", "C/j"] }), tree);
    expect(apart.own).toBe(false);
    expect(hintedCall(apart, {})).toEqual({ primitive: "reorder", args: ["k", "C/j"], kwargs: {} });
  });

  it("decompose_reduction and compute_at: every choice set from the hint, a loop the form's reading left out added", () => {
    const d = hintForm(step("decompose_reduction", { block: "Y", loop: "k" }), tree);
    expect(d.own).toBe(true);
    expect(buildCall(d.offer.spec, d.entry!, d.values)).toEqual({ primitive: "decompose_reduction", args: [], kwargs: { block: "Y", loop: "k" } });
    const c = hintForm(step("reverse_compute_at", { block: "C", loop: "Y/i", preserve_unit_loops: false }), tree);
    expect(c.own).toBe(true);
    expect(c.entry?.ref).toBe("C");
    const field = c.offer.fields.find((x) => x.name === "loop");
    expect(field && field.kind === "choice" && field.options.map((o) => o.value)).toContain("Y/i");
    expect(c.values.loop).toBe("Y/i");
    expect(buildCall(c.offer.spec, c.entry!, c.values).kwargs).toEqual({ block: "C", loop: "Y/i", preserve_unit_loops: false });
  });

  it("a call the explorer's form cannot make (a primitive it has no form for, an argument its form lacks) is offered as it is", () => {
    const align = step("storage_align", { block: "Y", buffer_index: 0, axis: 0, factor: 32, offset: 8 }, "the target pads rows", "storage_align(Y, 0, 0, 32, 8)");
    const f = hintForm(align, tree);
    expect(f.own).toBe(false);
    expect(hintedCall(f, {})).toEqual({ primitive: "storage_align", args: [], kwargs: { block: "Y", buffer_index: 0, axis: 0, factor: 32, offset: 8 } });
    expect(f.entry?.ref).toBe("Y");
    expect(f.offer.spec.help).toContain("storage_align(Y, 0, 0, 32, 8)");
    const some = hintForm(step("cache_read", { block: "Y", read_buffer_index: 0, storage_scope: "shared", consumer_blocks: ["Y"] }), tree);
    expect(some.own).toBe(false);
    expect(some.call.kwargs.consumer_blocks).toEqual(["Y"]);
    // the same without consumers is the explorer's own cache_read form
    const all = hintForm(step("cache_read", { block: "Y", read_buffer_index: 1, storage_scope: "shared" }), tree);
    expect(all.own).toBe(true);
    expect(all.values).toMatchObject({ read_buffer_index: "1", storage_scope: "shared" });
  });

  it("a call is the hint's when only TVM's defaults differ; another loop or factor is not", () => {
    const hinted = stepCall(step("compute_at", { block: "Y", loop: "C/j" }));
    expect(sameCall({ primitive: "compute_at", args: [], kwargs: { block: "Y", loop: "C/j", preserve_unit_loops: false } }, hinted, tree)).toBe(true);
    expect(sameCall({ primitive: "compute_at", args: [], kwargs: { block: "Y", loop: "C/j", preserve_unit_loops: true } }, hinted, tree)).toBe(false);
    expect(sameCall({ primitive: "compute_at", args: [], kwargs: { block: "Y", loop: "C/i" } }, hinted, tree)).toBe(false);
    expect(sameCall({ primitive: "split", args: [], kwargs: { loop: "Y/j", factors: [8, 16] } }, stepCall(SPLIT), tree)).toBe(false);
  });

  it("a loop named as printed (j_0) or qualified (Y/j_0) selects the same loop", () => {
    const t = new TreeIndex({ func: "f", functions: [{ kind: "func", name: "f", buffers: [], children: [loop("j_0", 16, [loop("j_1", 8)], { qualified: "Y/j_0" })] }] } as any);
    expect(hintForm(step("parallel", { loop: "j_0" }), t).entry?.ref).toBe("Y/j_0");
    expect(hintForm(step("parallel", { loop: "Y/j_0" }), t).entry?.ref).toBe("Y/j_0");
  });
});

describe("what the bar says", () => {
  it("N steps, at the target, up to block names, not reachable, the way back", () => {
    expect(wayStatus(null, 3).text).toBe("finding the way from step 3…");
    expect(wayStatus(way(1, [SPLIT, PARALLEL]), 1)).toMatchObject({ state: "steps", text: "2 steps to the target", remaining: 2, canHint: true });
    expect(wayStatus(way(1, [SPLIT]), 1).text).toBe("1 step to the target");
    expect(wayStatus(way(4, []), 4)).toMatchObject({ state: "at", text: "At the target: TVM's structural_equal holds", canHint: false });
    expect(wayStatus(way(4, [], { status: "names", why: "equal up to block names (Y_init is called init here)" }), 4).text).toContain("At the target up to block names");
    const no = wayStatus(way(2, [], { status: "unreached", why: "the target computes another block, D" }), 2);
    expect(no).toMatchObject({ state: "unreached", text: "Not reachable from here: the target computes another block, D", canHint: false });
    const back = wayStatus(way(5, [PARALLEL], { undo_to: 3 }), 5, (id) => (id === 3 ? "reorder(k_0, k_1, j_1)" : undefined));
    expect(back).toMatchObject({ state: "back", undoTo: 3, remaining: 1, canHint: false });
    expect(back.text).toBe("Not reachable from step 5: go back to step 3 (reorder(k_0, k_1, j_1)), then 1 step");
    expect(wayStatus({ step: 2, error: "the target could not be read" }, 2)).toMatchObject({ state: "error" });
    expect(wayBadge(wayStatus(way(1, [SPLIT, PARALLEL]), 1))).toBe("Way 2");
    expect(wayBadge(back)).toBe("Way ↶");
  });
});

// ---- through the explorer view --------------------------------------------------------------------

const HISTORY = [
  { id: 0, parent: null, kind: "root", primitive: null, label: "original program" },
  { id: 1, parent: 0, kind: "apply", primitive: "split", label: "split(k, factors=[None, 4])" },
];
const SETUP = { available: true, name: "TargetModule", source: "program", gpu: false };

let el: HTMLElement;
let dispose = () => {};
const $ = (sel: string) => el.querySelector<HTMLElement>(sel);
const $$ = (sel: string) => Array.from(el.querySelectorAll<HTMLElement>(sel));

async function mount(traits: Record<string, unknown>, live = true, before: (m: ReturnType<typeof fakeModel>) => void = () => undefined) {
  const model = fakeModel({ history: HISTORY, step: { id: 1, parent: 0, label: "split(k, factors=[None, 4])" }, ...traits });
  markKernel(model, () => live);
  before(model);
  ({ el, dispose } = await render(widget, model));
  await tick();
  return model;
}

afterEach(() => dispose());

describe("the way in the explorer", () => {
  it("without a target program there is no bar and no Way tab", async () => {
    await mount({ path_setup: {}, path: {} });
    expect($(".mlc-way-bar")!.hidden).toBe(true);
    expect($(".mlc-tab-way")!.hidden).toBe(true);
  });

  it("says how many steps are left; Hint opens the primitive's form filled in; Apply sends the hint's call", async () => {
    const model = await mount({ path_setup: SETUP, path: way(1, [SPLIT, PARALLEL]) });
    expect($(".mlc-way-bar")!.hidden).toBe(false);
    expect($(".mlc-way-target")!.textContent).toContain("TargetModule");
    expect($(".mlc-way-status")!.textContent).toBe("2 steps to the target");
    expect($(".mlc-tab-way")!.textContent).toBe("Way 2");
    ($(".mlc-way-hint") as HTMLButtonElement).click();
    await tick();
    const form = $(".mlc-form")!;
    expect(form.dataset.primitive).toBe("split");
    expect(form.querySelector(".mlc-form-hint")!.textContent).toContain("the target's inner j runs 8");
    expect($$(".mlc-factor").map((i) => (i as HTMLInputElement).value)).toEqual(["16", "8"]);
    expect(model.state.selection).toEqual({ kind: "loop", name: "Y/j" });
    // nothing is sent until the student presses Apply: the step is theirs
    expect(model.requests().filter((r) => r.method === "apply")).toEqual([]);
    (form.querySelector(".mlc-apply") as HTMLButtonElement).click();
    await tick();
    expect(model.requests().at(-1)!).toMatchObject({ method: "apply", params: { primitive: "split", args: [], kwargs: { loop: "Y/j", factors: [16, 8] } } });
  });

  it("a hint's form the student changes applies what it then holds", async () => {
    const model = await mount({ path_setup: SETUP, path: way(1, [SPLIT, PARALLEL]) });
    ($(".mlc-way-hint") as HTMLButtonElement).click();
    await tick();
    const inputs = $$(".mlc-factor") as HTMLInputElement[];
    ["32", "4"].forEach((v, i) => {
      inputs[i].value = v;
      inputs[i].dispatchEvent(new Event("input"));
    });
    ($(".mlc-form .mlc-apply") as HTMLButtonElement).click();
    await tick();
    expect(model.requests().at(-1)!.params).toEqual({ primitive: "split", args: [], kwargs: { loop: "Y/j", factors: [32, 4] } });
  });

  it("a new step: the way is being found (the last one dimmed); an answer for a step left behind is not shown", async () => {
    const model = await mount({ path_setup: SETUP, path: way(1, [SPLIT, PARALLEL]) });
    ($(".mlc-tab-way") as HTMLButtonElement).click();
    model.pushHistory([...HISTORY, { id: 2, parent: 1, kind: "apply", primitive: "split", label: "split(Y/j, factors=[16, 8])" }]);
    model.pushStep({ id: 2, parent: 1, label: "split(Y/j, factors=[16, 8])" });
    await tick();
    expect($(".mlc-way-status")!.textContent).toBe("finding the way from step 2…");
    expect(($(".mlc-way-hint") as HTMLButtonElement).disabled).toBe(true);
    expect($(".mlc-way-body")!.classList.contains("mlc-stale")).toBe(true);
    // a late answer for step 1 (the session has moved on): kept for step 1, not shown at step 2
    model.set("path", way(1, [PARALLEL, SPLIT, SPLIT]));
    await tick();
    expect($(".mlc-way-status")!.textContent).toBe("finding the way from step 2…");
    model.set("path", way(2, [PARALLEL]));
    await tick();
    expect($(".mlc-way-status")!.textContent).toBe("1 step to the target");
    expect($$(".mlc-way-step").map((r) => r.querySelector(".mlc-way-label")!.textContent)).toEqual(["parallel(Y/i)"]);
    expect($(".mlc-way-body")!.classList.contains("mlc-stale")).toBe(false);
  });

  it("Show the way lists every step with its sentence and the trace that replays it", async () => {
    await mount({ path_setup: SETUP, path: way(1, [SPLIT, PARALLEL]) });
    ($(".mlc-way-show") as HTMLButtonElement).click();
    await tick();
    expect($(".mlc-way")!.hidden).toBe(false);
    const rows = $$(".mlc-way-step");
    expect(rows.map((r) => r.dataset.primitive)).toEqual(["split", "parallel"]);
    expect(rows[0].classList.contains("mlc-way-next")).toBe(true);
    expect(rows[0].querySelector(".mlc-way-reason")!.textContent).toContain("split j into 16 x 8");
    expect($(".mlc-way-trace pre")!.textContent).toContain("def apply_trace(sch)");
  });

  it("after a wrong step: the way back, and a button that goes there (the page moves, the kernel follows)", async () => {
    const history = [...HISTORY, { id: 2, parent: 1, kind: "apply", primitive: "decompose_reduction", label: "decompose_reduction(Y, k_0)" }];
    const model = await mount({ history, step: { id: 2, parent: 1, label: "decompose_reduction(Y, k_0)" }, path_setup: SETUP, path: way(2, [PARALLEL], { undo_to: 1 }) });
    expect($(".mlc-way-status")!.textContent).toBe("Not reachable from step 2: go back to step 1 (split(k, factors=[None, 4])), then 1 step");
    expect(($(".mlc-way-hint") as HTMLButtonElement).disabled).toBe(true);
    expect($(".mlc-way-back")!.hidden).toBe(false);
    ($(".mlc-tab-way") as HTMLButtonElement).click();
    await tick();
    expect($(".mlc-way-undo")!.textContent).toContain("go back to step 1");
    ($(".mlc-way-back") as HTMLButtonElement).click();
    await tick();
    // step 1 is not held by this page (it opened at step 2): the kernel is asked to go there
    expect(model.requests().at(-1)!).toMatchObject({ method: "goto", params: { step: 1 } });
  });

  it("at the target the bar says so and Hint has nothing to fill", async () => {
    await mount({ path_setup: SETUP, path: way(1, []) });
    expect($(".mlc-way-status")!.textContent).toBe("At the target: TVM's structural_equal holds");
    expect($(".mlc-way-status")!.dataset.state).toBe("at");
    expect(($(".mlc-way-hint") as HTMLButtonElement).disabled).toBe(true);
    expect($(".mlc-tab-way")!.textContent).toBe("Way ✓");
  });

  it("a saved view shows the way recorded for a step, and says when a step's way needs a kernel", async () => {
    const recorded = way(1, [PARALLEL]);
    const record = { get: (k: string) => ({ result: JSON.stringify(recorded), ok: true, buffers: [], encoding: "", data: new DataView(new ArrayBuffer(0)) })[k] };
    await mount({ path_setup: SETUP, path: {}, _mlc_recorded: { [recordKey("path", { step: 1 })]: "IPY_MODEL_w1" } }, false, (m) =>
      m.widget_manager.get_model.mockImplementation(async (id: string) => (id === "w1" ? record : null)),
    );
    await tick();
    await tick();
    expect($(".mlc-way-status")!.textContent).toBe("1 step to the target");
    dispose();
    await mount({ path_setup: SETUP, path: {} }, false);
    await tick();
    expect($(".mlc-way-status")!.textContent).toContain("needs a running kernel");
  });
});
