// @vitest-environment jsdom
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import widget from "../explorer";
import { BUSY_DELAY_MS } from "../explorer/view";
import { FOLLOW } from "../lib/model";
import { fakeModel, mmRelu, render, SCRIPT, tick, treeBytes } from "./fixtures";

type Model = ReturnType<typeof fakeModel>;
let model: Model;
let el: HTMLElement;
let dispose = () => {};

const $ = (sel: string) => el.querySelector<HTMLElement>(sel);
/** The notes the view sent the kernel (fire and forget: the Session follows the page). */
const notes = () => model.send.mock.calls.map((c: any[]) => c[0]).filter((m: any) => m?.kind === FOLLOW);
const $$ = (sel: string) => Array.from(el.querySelectorAll<HTMLElement>(sel));
const row = (kind: string, name: string) => $(`.mlc-row[data-kind="${kind}"][data-name="${name}"]`)!;
const key = (k: string, extra: KeyboardEventInit = {}) =>
  $(".mlc-explorer")!.dispatchEvent(new KeyboardEvent("keydown", { key: k, bubbles: true, cancelable: true, ...extra }));

async function mount(initial = {}) {
  model = fakeModel(initial);
  ({ el, dispose } = await render(widget, model));
}

beforeEach(async () => {
  await mount();
});
afterEach(() => {
  dispose();
});

describe("explorer view", () => {
  it("renders the loop nest, the code and the history; JupyterLab's chords are not suppressed", () => {
    expect($$(".mlc-row").length).toBe(8);
    expect(row("loop", "Y/i").textContent).toContain("128");
    expect($(".mlc-row[data-name='Y'] .mlc-iter-reduce")?.textContent).toBe("R");
    expect($(".mlc-row[data-name='Y'] .mlc-init")).not.toBeNull();
    expect($(".mlc-code-main .cm-content")?.textContent).toContain("line 1");
    expect($$(".mlc-hrow").length).toBe(1);
    expect($(".mlc-explorer")?.hasAttribute("data-lm-suppress-shortcuts")).toBe(false);
    expect(($(".mlc-undo") as HTMLButtonElement).disabled).toBe(true);
  });

  it("clicking a row selects it (synced to Python) and offers what applies", async () => {
    row("loop", "Y/j").click();
    expect(model.state.selection).toEqual({ kind: "loop", name: "Y/j" });
    expect(model.save_changes).toHaveBeenCalled();
    await tick();
    expect(row("loop", "Y/j").classList.contains("mlc-selected")).toBe(true);
    const prims = $$(".mlc-prim").map((b) => b.dataset.primitive);
    expect(prims).toEqual(expect.arrayContaining(["split", "reorder", "fuse", "parallel"]));
    expect(prims).not.toContain("compute_at");
  });

  it("a step that leaves the selection's offers alone keeps the primitive buttons, which act on the new tree", async () => {
    row("loop", "Y/j").click();
    await tick();
    const before = $$(".mlc-prim");
    const tree = mmRelu();
    Object.assign(tree.functions[0].children[1], { loop_kind: "parallel" }); // C/i: not the selection
    model.pushStep({ id: 1, parent: 0, kind: "apply", primitive: "parallel", label: "parallel(C/i)", loop_tree: tree });
    await tick();
    expect(row("loop", "C/i").querySelector(".mlc-kind-parallel")).not.toBeNull();
    const after = $$(".mlc-prim");
    expect(after.length).toBe(before.length);
    after.forEach((b, i) => expect(b).toBe(before[i]));
    $(".mlc-prim[data-primitive='parallel']")!.click();
    expect(model.requests().at(-1)!.params).toEqual({ primitive: "parallel", args: [], kwargs: { loop: "Y/j" } });
  });

  it("marks loop kinds with badges", async () => {
    const tree = mmRelu();
    Object.assign(tree.functions[0].children[1], { loop_kind: "thread_binding", thread: "blockIdx.x" });
    model.pushStep({ id: 1, parent: 0, loop_tree: tree }); // a new step: one id is one step
    await tick();
    expect(row("loop", "C/i").querySelector(".mlc-kind-thread_binding")?.textContent).toBe("blockIdx.x");
  });

  it("a T.where guard shows on its block; hovering a row previews its lines", async () => {
    const tree = mmRelu();
    const y = (tree.functions[0].children[0] as any).children[0].children[0].children[0];
    y.predicate = "j_0 * 5 + j_1 < 128";
    model.pushStep({ id: 1, parent: 0, loop_tree: tree }); // a new step: one id is one step
    await tick();
    expect(row("block", "Y").querySelector(".mlc-where")?.getAttribute("title")).toContain("T.where(j_0 * 5 + j_1 < 128)");
    row("block", "C").dispatchEvent(new MouseEvent("mouseenter"));
    expect($$(".mlc-code-main .mlc-line-hover").length).toBeGreaterThan(0);
    row("block", "C").dispatchEvent(new MouseEvent("mouseleave"));
    expect($$(".mlc-code-main .mlc-line-hover").length).toBe(0);
  });

  it("split form: presets, a predicate warning, and the apply request", async () => {
    row("loop", "Y/j").click();
    await tick();
    $(".mlc-prim[data-primitive='split']")!.click();
    const form = $(".mlc-form[data-primitive='split']")!;
    const inputs = form.querySelectorAll<HTMLInputElement>(".mlc-factor");
    inputs[1].value = "5";
    inputs[1].dispatchEvent(new Event("input"));
    expect(form.querySelector(".mlc-factor-note")!.textContent).toMatch(/predicate/);
    expect(form.querySelector(".mlc-factor-note")!.className).toContain("mlc-warn-text");
    inputs[1].dispatchEvent(new Event("focus"));
    const chip = Array.from(form.querySelectorAll<HTMLButtonElement>(".mlc-chip")).find((c) => c.textContent === "4")!;
    chip.click();
    (form.querySelector(".mlc-apply") as HTMLButtonElement).click();
    const req = model.requests().at(-1)!;
    expect(req.method).toBe("apply");
    expect(req.params).toEqual({ primitive: "split", args: [], kwargs: { loop: "Y/j", factors: [null, 4] } });
  });

  it("an invalid split cannot be applied", async () => {
    row("loop", "Y/j").click();
    await tick();
    $(".mlc-prim[data-primitive='split']")!.click();
    const form = $(".mlc-form")!;
    const inputs = form.querySelectorAll<HTMLInputElement>(".mlc-factor");
    inputs[0].value = "2";
    inputs[0].dispatchEvent(new Event("input"));
    inputs[1].value = "2";
    inputs[1].dispatchEvent(new Event("input"));
    expect((form.querySelector(".mlc-apply") as HTMLButtonElement).disabled).toBe(true);
  });

  it("reorder form moves loops", async () => {
    row("loop", "Y/j").click();
    await tick();
    key("r");
    const items = () => $$(".mlc-order-item").map((i) => i.dataset.loop);
    expect(items()).toEqual(["Y/i", "Y/j", "k"]);
    ($$(".mlc-order-item")[2].querySelector(".mlc-up") as HTMLButtonElement).click();
    expect(items()).toEqual(["Y/i", "k", "Y/j"]);
    ($(".mlc-form .mlc-apply") as HTMLButtonElement).click();
    expect(model.requests().at(-1)!.params).toEqual({ primitive: "reorder", args: ["Y/i", "k", "Y/j"], kwargs: {} });
  });

  it("a primitive without fields applies at once", async () => {
    row("loop", "C/i").click();
    await tick();
    $(".mlc-prim[data-primitive='parallel']")!.click();
    expect(model.requests().at(-1)!.params).toEqual({ primitive: "parallel", args: [], kwargs: { loop: "C/i" } });
  });

  it("'working…' shows only for a request that outlasts BUSY_DELAY_MS; a quick answer changes nothing on the click", async () => {
    row("loop", "C/i").click();
    await tick();
    vi.useFakeTimers();
    try {
      const busy = () => !$(".mlc-busy")!.hidden;
      const cursor = () => $(".mlc-explorer")!.classList.contains("mlc-busy-state");
      const parallel = () => $(".mlc-prim[data-primitive='parallel']")!.click();
      parallel();
      expect(model.requests().at(-1)!.method).toBe("apply");
      expect([busy(), cursor()]).toEqual([false, false]);
      await vi.advanceTimersByTimeAsync(BUSY_DELAY_MS / 2);
      model.reply({ names: [] });
      await vi.advanceTimersByTimeAsync(BUSY_DELAY_MS * 2);
      expect([busy(), cursor()]).toEqual([false, false]);

      parallel();
      await vi.advanceTimersByTimeAsync(BUSY_DELAY_MS + 1);
      expect([busy(), cursor()]).toEqual([true, true]);
      model.reply({ names: [] });
      await vi.advanceTimersByTimeAsync(0);
      expect([busy(), cursor()]).toEqual([false, false]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("re-renders when Python changes the state (a step from a cell)", async () => {
    model.pushHistory([{ id: 1, parent: 0, primitive: "parallel", label: "parallel(C/i)", kind: "apply" }], 1); // a delta
    model.pushStep({ id: 1, parent: 0, kind: "apply", primitive: "parallel", label: "parallel(C/i)", script: `${SCRIPT}\nline 27`, changed_lines: [27] });
    await tick();
    expect($(".mlc-code-main .cm-content")?.textContent).toContain("line 27");
    expect($(".mlc-line-changed")).not.toBeNull();
    expect($$(".mlc-hrow").length).toBe(2);
    expect($(".mlc-hrow.mlc-current")?.textContent).toContain("parallel(C/i)");
    expect($(".mlc-step-label")?.textContent).toContain("parallel(C/i)");
    model.pushHistory([
      { id: 0, parent: null, primitive: null, label: "original program", kind: "root" },
      { id: 1, parent: 0, primitive: "SamplePerfectTile", label: "decision #0 = [8, 16]", kind: "decision" },
    ]);
    await tick();
    expect($(".mlc-hrow.mlc-current .mlc-hkind")?.textContent).toBe("decision");
    expect(($(".mlc-undo") as HTMLButtonElement).disabled).toBe(false);
  });

  it("history arrives as deltas; a gap (a view opened late) is filled by asking Python", async () => {
    model.pushHistory([{ id: 1, parent: 0, primitive: "parallel", label: "parallel(C/i)" }], 1);
    await tick();
    expect($$(".mlc-hrow").length).toBe(2);
    model.pushHistory([{ id: 1, parent: 0, primitive: "parallel", label: "parallel(C/i)" }], 1); // the same delta again
    await tick();
    expect($$(".mlc-hrow").length).toBe(2);
    model.pushHistory([{ id: 4, parent: 3, primitive: "unroll", label: "unroll(k)" }], 4);
    expect(model.requests().at(-1)!.method).toBe("history");
    model.reply({ from: 0, steps: [0, 1, 2, 3, 4].map((id) => ({ id, parent: id ? id - 1 : null, primitive: null, label: `step ${id}` })) });
    await tick();
    await tick();
    expect($$(".mlc-hrow").length).toBe(5);
  });

  it("history: clicking a step the page holds shows it at once; the kernel is told, not asked", async () => {
    model.pushHistory([{ id: 1, parent: 0, primitive: "parallel", label: "parallel" }], 1);
    model.pushStep({ id: 1, parent: 0, label: "parallel", script: `${SCRIPT}\nline 27` });
    await tick();
    const first = $$(".mlc-hrow")[0];
    first.click();
    await tick();
    expect(model.requests()).toEqual([]); // no request: nothing to wait for
    expect(notes()).toEqual([{ kind: FOLLOW, step: 0 }]);
    expect(JSON.parse(new TextDecoder().decode(model.state.step as DataView)).id).toBe(0);
    expect($(".mlc-code-main .cm-content")?.textContent).not.toContain("line 27");
    // a move only restyles the rows
    expect($$(".mlc-hrow")[0]).toBe(first);
    expect(first.classList.contains("mlc-current")).toBe(true);
    expect($$(".mlc-hrow")[1].classList.contains("mlc-current")).toBe(false);
    $$(".mlc-hrow")[1].click();
    await tick();
    expect(notes().at(-1)).toEqual({ kind: FOLLOW, step: 1 });
    expect($(".mlc-code-main .cm-content")?.textContent).toContain("line 27");
  });

  it("history: a step the page never held (made before it opened) is asked of the kernel", async () => {
    model.pushHistory([0, 1, 2].map((id) => ({ id, parent: id ? id - 1 : null, primitive: null, label: `step ${id}` })));
    await tick();
    $$(".mlc-hrow")[1].click();
    await tick();
    expect(model.requests().at(-1)).toMatchObject({ method: "goto", params: { step: 1 } });
    expect(notes()).toEqual([]);
  });

  it("undo and redo are answered by the page; redo goes to the child visited last, as the Session's", async () => {
    // 0 -> 1, then 0 -> 2 (a branch); the page saw both steps
    model.pushHistory([{ id: 1, parent: 0, primitive: "parallel", label: "parallel" }], 1);
    model.pushStep({ id: 1, parent: 0, label: "parallel", script: "one" });
    model.pushHistory([{ id: 2, parent: 0, primitive: "unroll", label: "unroll" }], 2);
    model.pushStep({ id: 2, parent: 0, label: "unroll", script: "two" });
    await tick();
    $$(".mlc-hrow")[1].click(); // go to step 1: now the child of 0 visited last
    await tick();
    ($(".mlc-undo") as HTMLButtonElement).click();
    await tick();
    ($(".mlc-redo") as HTMLButtonElement).click();
    await tick();
    expect(notes().map((n) => n.step)).toEqual([1, 0, 1]); // the newest child would be 2
    expect($(".mlc-code-main .cm-content")?.textContent).toContain("one");
    expect(model.requests()).toEqual([]);
  });

  it("shows an error with the involved loops highlighted; Esc asks to clear it", async () => {
    model.set("error", { source: "apply", primitive: "vectorize", summary: "k is a reduction loop", involved: ["k", "Y"], detail: "TVM says no" });
    model.set("failures", [{ id: 1, parent: 0, primitive: "vectorize", label: "vectorize(k)", summary: "k is a reduction loop", detail: "", involved: ["k"] }]);
    await tick();
    expect($(".mlc-banner")!.hidden).toBe(false);
    expect($(".mlc-error-summary")!.textContent).toBe("vectorize: k is a reduction loop");
    expect($$(".mlc-row.mlc-involved").map((r) => r.dataset.name)).toEqual(["k", "Y"]);
    expect($(".mlc-hrow-failure")?.textContent).toContain("vectorize(k)");
    key("Escape");
    expect(model.requests().at(-1)!.method).toBe("clear_error");
    model.set("error", {});
    await tick();
    expect($(".mlc-banner")!.hidden).toBe(true);
  });

  it("keyboard: arrows move the selection, ctrl+z / ctrl+shift+z / ctrl+y undo and redo", async () => {
    key("ArrowDown");
    expect(model.state.selection).toEqual({ kind: "func", name: "mm_relu" });
    key("ArrowDown");
    expect(model.state.selection).toEqual({ kind: "loop", name: "Y/i" });
    await tick();
    key("ArrowRight");
    expect(model.state.selection).toEqual({ kind: "loop", name: "Y/j" });
    await tick();
    key("ArrowLeft");
    expect(model.state.selection).toEqual({ kind: "loop", name: "Y/i" });
    model.pushHistory([{ id: 1, parent: 0, primitive: "parallel", label: "parallel" }], 1);
    model.pushStep({ id: 1, parent: 0, label: "parallel" });
    await tick();
    key("z", { ctrlKey: true });
    await tick();
    key("z", { ctrlKey: true, shiftKey: true });
    await tick();
    key("z", { ctrlKey: true });
    await tick();
    key("y", { ctrlKey: true });
    await tick();
    expect(notes().map((n) => n.step)).toEqual([0, 1, 0, 1]);
    expect(model.requests()).toEqual([]);
  });

  it("keys typed into a form stay in the form", async () => {
    row("loop", "Y/j").click();
    await tick();
    key("s");
    const input = $(".mlc-factor") as HTMLInputElement;
    input.dispatchEvent(new KeyboardEvent("keydown", { key: "r", bubbles: true }));
    expect($(".mlc-form[data-primitive='reorder']")).toBeNull();
    expect($(".mlc-form[data-primitive='split']")).not.toBeNull();
  });

  it("trace tab: decision knobs send set_decision, replay sends the edited text", async () => {
    model.pushStep({ id: 1, parent: 0, decisions: [{ index: 0, position: 1, kind: "SamplePerfectTile", value: [32, 4], choices: [[128, 1], [64, 2], [32, 4], [16, 8]], loop: "k", extent: 128 }], trace: "sch.split(l, [None, 4])" });
    await tick();
    ($(".mlc-tab-trace") as HTMLButtonElement).click();
    const select = $(".mlc-knob select") as HTMLSelectElement;
    expect(select.value).toBe("2");
    select.value = "3";
    select.dispatchEvent(new Event("change"));
    expect(model.requests().at(-1)).toMatchObject({ method: "set_decision", params: { index: 0, value: [16, 8] } });
    ($(".mlc-replay") as HTMLButtonElement).click();
    expect(model.requests().at(-1)).toMatchObject({ method: "replay", params: { trace: "sch.split(l, [None, 4])" } });
  });

  it("a replay error is shown at its line", async () => {
    ($(".mlc-tab-trace") as HTMLButtonElement).click();
    model.pushStep({ id: 1, parent: 0, trace: "a\nb\nc" });
    await tick();
    model.set("error", { source: "replay", summary: "not a schedule call", line: 2 });
    await tick();
    expect($(".mlc-trace-status")!.textContent).toBe("line 2: not a schedule call");
    expect($(".mlc-trace .mlc-line-error")).not.toBeNull();
  });

  it("diff mode compares with a step the page holds, and asks the kernel once for one it never held", async () => {
    model.pushHistory([{ id: 1, parent: 0, primitive: "parallel", label: "parallel" }], 1);
    model.pushStep({ id: 1, parent: 0, label: "parallel" });
    await tick();
    const mode = $(".mlc-diff-mode") as HTMLSelectElement;
    mode.value = "split";
    mode.dispatchEvent(new Event("change"));
    await tick();
    await tick();
    expect(model.requests()).toEqual([]); // step 0 was shown here: the page has its script
    expect($(".cm-mergeView")).not.toBeNull();
    mode.value = "off";
    mode.dispatchEvent(new Event("change"));
    // steps 2 and 3 were made in a cell: the page was sent step 3 only
    model.pushHistory([2, 3].map((id) => ({ id, parent: id - 1, primitive: "unroll", label: `step ${id}` })), 2);
    model.pushStep({ id: 3, parent: 2, label: "step 3" });
    await tick();
    mode.value = "split";
    mode.dispatchEvent(new Event("change"));
    await tick();
    const req = model.requests().at(-1)!;
    expect(req).toMatchObject({ method: "script_at", params: { step: "2" } });
    model.reply({ bytes: 3 }, true, [new DataView(new TextEncoder().encode("old").buffer)]);
    await tick();
    await tick();
    expect($(".mlc-code-diff")!.hidden).toBe(false);
    expect($(".cm-mergeView")).not.toBeNull();
    mode.value = "unified";
    mode.dispatchEvent(new Event("change"));
    await tick();
    expect(model.requests().filter((r) => r.method === "script_at").length).toBe(1); // cached
  });

  it("cleans up on close", () => {
    dispose();
    expect(el.querySelector(".mlc-explorer")).toBeNull();
  });
});
