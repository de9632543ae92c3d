// @vitest-environment jsdom
// The explorer's Checks panel (js/checks/panel.ts) and the history's hazard marks, driven through
// the explorer view with a fake model as Python would set its traits.
import { afterEach, describe, expect, it } from "vitest";
import widget from "../explorer";
import { type StepChecks, checksBadge, evidenceText, hazardMark, pathAfter, taskCosts, taskPoints, taskVerdicts } from "../checks/panel";
import { markKernel, recordKey } from "../lib/offline";
import { fakeModel, render, tick } from "./fixtures";

type Model = ReturnType<typeof fakeModel>;
let el: HTMLElement;
let dispose = () => {};

const $ = (sel: string) => el.querySelector<HTMLElement>(sel);
const $$ = (sel: string) => Array.from(el.querySelectorAll<HTMLElement>(sel));

const HISTORY = [
  { id: 0, parent: null, kind: "root", primitive: null, label: "original program" },
  { id: 1, parent: 0, kind: "apply", primitive: "split", label: "split(Y/j, factors=[None, 4])" },
];

function report(step: number, parallel: boolean, extra: Partial<StepChecks> = {}): StepChecks {
  return {
    step,
    target: "cpu",
    ms: 3.2,
    hazards: [],
    checks: [
      { name: "parallel", title: "parallel loops", ok: parallel, verdict: parallel ? "pass" : "fail", message: parallel ? "loop Y/i runs on 4 cores" : "no loop runs in parallel: parallelize Y/i", where: "Y/i", evidence: { cores: 4, parallel_loops: parallel ? ["Y/i"] : [] } },
      { name: "vectorize", title: "vectorization", ok: true, verdict: "pass", message: "Y/j_1 is vectorized 4 wide", where: "Y/j", evidence: { width: 4, tile: [4, 8] } },
    ],
    ...extra,
  };
}

async function mount(traits: Record<string, unknown>, live = true, before: (m: Model) => void = () => undefined): Promise<Model> {
  const model = fakeModel({ history: HISTORY, step: { id: 1, parent: 0, label: "split(Y/j, factors=[None, 4])" }, ...traits });
  markKernel(model, () => live);
  before(model);
  ({ el, dispose } = await render(widget, model));
  ($(".mlc-tab-checks") as HTMLButtonElement).click();
  return model;
}

afterEach(() => {
  dispose();
});

const SETUP = { available: true, title: null, target: "cpu", names: null, tasks: [] };

describe("checks panel", () => {
  it("lists each check with its sentence, the evidence on hover, and follows a new report", async () => {
    const model = await mount({ checks_setup: SETUP, checks: report(1, false) });
    const lines = $$(".mlc-check");
    expect(lines.map((l) => l.dataset.check)).toEqual(["parallel", "vectorize"]);
    expect(lines[0].classList.contains("mlc-check-fail")).toBe(true);
    expect(lines[0].querySelector(".mlc-check-mark")!.textContent).toBe("✗");
    expect(lines[0].textContent).toContain("no loop runs in parallel");
    expect(lines[0].title).toContain("cores: 4");
    expect(lines[1].title).toContain("tile: 4x8");
    expect($(".mlc-tab-checks")!.textContent).toBe("Checks 1/2");
    // a step applied: the state comes first (the old report is dimmed while the new one is computed) ...
    model.pushHistory([...HISTORY, { id: 2, parent: 1, kind: "apply", primitive: "parallel", label: "parallel(Y/i)" }]);
    model.pushStep({ id: 2, parent: 1, label: "parallel(Y/i)" });
    await tick();
    expect($(".mlc-checks-body")!.classList.contains("mlc-stale")).toBe(true);
    expect($(".mlc-checks-pending")!.textContent).toContain("checking step 2");
    // ... then its checks
    model.set("checks", report(2, true));
    await tick();
    expect($(".mlc-checks-body")!.classList.contains("mlc-stale")).toBe(false);
    expect($$(".mlc-check-fail")).toHaveLength(0);
    expect($(".mlc-tab-checks")!.textContent).toBe("Checks 2/2");
  });

  it("a click on a line selects its loop in the tree", async () => {
    const model = await mount({ checks_setup: SETUP, checks: report(1, false) });
    $(".mlc-check[data-check='parallel']")!.click();
    expect(model.state.selection).toEqual({ kind: "loop", name: "Y/i" });
    await tick();
    expect($(".mlc-row.mlc-selected")!.dataset.name).toBe("Y/i");
  });

  it("groups the lines by task; shows the step's hazards above them", async () => {
    const tasks = [
      { title: "Use the cores", checks: ["parallel"], points: 5 },
      { title: "Vectorize", checks: ["vectorize"], points: null },
    ];
    const hazards = [{ kind: "race" as const, message: "threads 0 and 1 both write Y[0, 0]", where: "Y" }];
    await mount({ checks_setup: { ...SETUP, title: "Lab 2", tasks }, checks: report(1, false, { hazards }) });
    expect($(".mlc-checks-title")!.textContent).toBe("Lab 2");
    const t = $$(".mlc-task");
    expect(t.map((x) => x.classList.contains("mlc-task-ok"))).toEqual([false, true]);
    expect(t[0].textContent).toContain("Use the cores (5 pts)");
    expect(t[0].querySelectorAll(".mlc-check")).toHaveLength(1);
    const z = $(".mlc-hazard")!;
    expect(z.dataset.hazard).toBe("race");
    expect(z.textContent).toContain("threads 0 and 1 both write");
    expect($(".mlc-tab-checks")!.textContent).toBe("Checks 1/2 ⚠1");
  });

  it("marks the history row of the step that creates a hazard, with its sentence on hover", async () => {
    const model = await mount({ checks_setup: SETUP, checks: report(1, true) });
    expect($$(".mlc-hhazard")).toHaveLength(0);
    const hz = { kind: "out_of_bounds" as const, message: "block Y reads A at index 130 past its end", where: "Y" };
    model.set("hazards", { "1": { new: [hz], count: 1 } });
    await tick();
    const marks = $$(".mlc-hhazard");
    expect(marks).toHaveLength(1);
    expect(marks[0].closest<HTMLElement>(".mlc-hrow")!.dataset.step).toBe("1");
    expect(marks[0].title).toContain("out of bounds: block Y reads A at index 130 past its end");
  });

  it("a saved view shows the recorded report of a step, and says when a step needs a kernel", async () => {
    const recorded = report(1, false);
    const record = { get: (k: string) => ({ result: JSON.stringify(recorded), ok: true, buffers: [], encoding: "", data: new DataView(new ArrayBuffer(0)) })[k] };
    const model = await mount({ checks_setup: SETUP, checks: {}, _mlc_recorded: { [recordKey("checks", { step: 1 })]: "IPY_MODEL_c1" } }, false, (m) =>
      m.widget_manager.get_model.mockImplementation(async (id: string) => (id === "c1" ? record : null)),
    );
    await tick();
    await tick();
    expect($$(".mlc-check").map((l) => l.dataset.check)).toEqual(["parallel", "vectorize"]);
    // step 0 was never checked while the kernel ran
    model.pushStep({ id: 0, parent: null, label: "original program" });
    await tick();
    await tick();
    expect($(".mlc-checks-nokernel")!.textContent).toContain("The checks of step 0 need a running kernel");
    expect($(".mlc-banner")!.hidden).toBe(true); // no error
  });

  it("behind another tab the panel is not redrawn on a click, only the tab's label; shown, it is", async () => {
    const model = await mount({ checks_setup: SETUP, checks: report(1, false) });
    ($(".mlc-tab-history") as HTMLButtonElement).click();
    const before = $(".mlc-checks-body");
    model.pushHistory([...HISTORY, { id: 2, parent: 1, kind: "apply", primitive: "parallel", label: "parallel(Y/i)" }]);
    model.pushStep({ id: 2, parent: 1, label: "parallel(Y/i)" });
    model.set("checks", report(2, true));
    await tick();
    expect($(".mlc-checks-body")).toBe(before); // the same element: nothing drawn while hidden
    expect($(".mlc-tab-checks")!.textContent).toBe("Checks 2/2");
    ($(".mlc-tab-checks") as HTMLButtonElement).click();
    expect($(".mlc-checks-body")).not.toBe(before);
    expect($$(".mlc-check-fail")).toHaveLength(0);
  });

  it("back at a step it was sent the report of, the page shows that report (Python does not send it again)", async () => {
    const model = await mount({ checks_setup: SETUP, checks: report(1, false) });
    model.pushHistory([...HISTORY, { id: 2, parent: 1, kind: "apply", primitive: "parallel", label: "parallel(Y/i)" }]);
    model.pushStep({ id: 2, parent: 1, label: "parallel(Y/i)" });
    model.set("checks", report(2, true));
    await tick();
    expect($$(".mlc-check-fail")).toHaveLength(0);
    ($(".mlc-undo") as HTMLButtonElement).click(); // answered by the page: no new `checks` comes
    await tick();
    await tick();
    expect($$(".mlc-check-fail").map((l) => l.closest<HTMLElement>(".mlc-check")!.dataset.check)).toEqual(["parallel"]);
    expect($(".mlc-tab-checks")!.textContent).toBe("Checks 1/2");
  });

  it("a step the checks could not judge says why in one sentence", async () => {
    await mount({ checks_setup: SETUP, checks: { step: 1, error: "the program has symbolic shapes (n) and the checks need their values" } });
    expect($(".mlc-checks-error")!.textContent).toBe("the program has symbolic shapes (n) and the checks need their values");
    expect($$(".mlc-check")).toHaveLength(0);
    expect($(".mlc-tab-checks")!.textContent).toBe("Checks");
  });

  it("a check that could not judge is neither ✓ nor ✗, and does not turn the tab red", async () => {
    const r = report(1, true);
    r.checks!.push({ name: "packing", title: "packed operand", ok: false, verdict: "unjudged", message: "packed operand does not apply to this program: it has no reduction", where: null, evidence: {} });
    const tasks = [{ title: "Pack", checks: ["packing"], points: 5 }];
    await mount({ checks_setup: { ...SETUP, tasks }, checks: r });
    const line = $(".mlc-check[data-check='packing']")!;
    expect(line.classList.contains("mlc-check-unjudged")).toBe(true);
    expect(line.classList.contains("mlc-check-fail")).toBe(false);
    expect(line.querySelector(".mlc-check-mark")!.textContent).toBe("–");
    expect($(".mlc-task")!.classList.contains("mlc-task-unjudged")).toBe(true);
    expect($(".mlc-tab-checks")!.textContent).toBe("Checks 2/3");
    expect($(".mlc-tab-checks")!.classList.contains("mlc-tab-warn")).toBe(false);
  });

  it("the original program (step 0) is not shown as failing: its checks are not judged yet", async () => {
    const model = await mount({ checks_setup: SETUP, checks: report(1, false) });
    expect($(".mlc-tab-checks")!.classList.contains("mlc-tab-warn")).toBe(true); // step 1 fails parallel
    model.pushStep({ id: 0, parent: null, label: "original program" });
    model.set("checks", report(0, false));
    await tick();
    const line = $(".mlc-check[data-check='parallel']")!;
    expect(line.classList.contains("mlc-check-todo")).toBe(true);
    expect(line.querySelector(".mlc-check-mark")!.textContent).toBe("○");
    expect(line.title).toContain("not judged yet");
    expect($$(".mlc-check-fail")).toHaveLength(0);
    expect($(".mlc-tab-checks")!.classList.contains("mlc-tab-warn")).toBe(false);
  });

  it("a hazard's ⚠ says whether it is still there at the current step, or the step that resolved it", async () => {
    const hz = { kind: "limit" as const, message: "the kernel allocates 64 KB of shared memory", where: "i_0" };
    const model = await mount({ checks_setup: SETUP, checks: report(1, true), hazards: { "1": { new: [hz], count: 1 } } });
    expect($(".mlc-hhazard")!.title).toContain("(still there)");
    model.pushHistory([...HISTORY, { id: 2, parent: 1, kind: "apply", primitive: "compute_at", label: "compute_at(A_shared, k_0)" }]);
    model.pushStep({ id: 2, parent: 1, label: "compute_at(A_shared, k_0)" });
    model.set("hazards", { "1": { new: [hz], count: 1 }, "2": { new: [], count: 0, resolved: [hz] } });
    await tick();
    const mark = $(".mlc-hrow[data-step='1'] .mlc-hhazard")!;
    expect(mark.title).toContain("(resolved at step 2)");
    expect(mark.classList.contains("mlc-hhazard-resolved")).toBe(true);
  });

  it("a session without checks says so", async () => {
    await mount({ checks_setup: { available: false }, checks: {} });
    expect($(".mlc-checks")!.textContent).toContain("no named checks");
  });
});

describe("checks helpers", () => {
  it("evidence as lines, nested tables indented", () => {
    expect(evidenceText({ accumulator: "Y_local", thread_tile: [4, 4], A_shared: { reuse: 64.0, efficiency: 0.66666 } })).toBe(
      "accumulator: Y_local\nthread tile: 4x4\nA shared:\n  reuse: 64\n  efficiency: 0.667",
    );
  });
  it("hazard marks only for hazards a step creates", () => {
    const z = { kind: "spill" as const, message: "Y_local goes to the stack", where: "gemm" };
    expect(hazardMark({ new: [], count: 1 })).toBeNull();
    expect(hazardMark(undefined)).toBeNull();
    expect(hazardMark({ new: [z, z], count: 3 })!.text).toBe("⚠2");
  });
  it("the path from a step to the current one, or null on another branch", () => {
    const steps = [
      { id: 0, parent: null },
      { id: 1, parent: 0 },
      { id: 2, parent: 1 },
      { id: 3, parent: 0 },
    ];
    expect(pathAfter(steps, 0, 2)).toEqual([1, 2]);
    expect(pathAfter(steps, 1, 1)).toEqual([]);
    expect(pathAfter(steps, 1, 3)).toBeNull();
  });
  it("a check that does not apply is left out of the count: 5/5, not 5/6", () => {
    const line = (name: string, ok: boolean, verdict: "pass" | "fail" | "unjudged", reason?: string) => ({ name, title: name, ok, verdict, message: "", where: null, evidence: reason ? { reason } : {} });
    const rep = {
      step: 9,
      target: "cuda" as const,
      checks: [...["a", "b", "c", "d", "e"].map((n) => line(n, true, "pass")), line("epilogue_fusion", false, "unjudged", "does not apply")],
      hazards: [],
    };
    expect(checksBadge(rep)).toMatchObject({ passed: 5, total: 5, na: 1, warn: false });
    // not judged yet (it will be, after the next steps) still counts: the step can still earn it
    const later = { ...rep, checks: [...rep.checks.slice(0, 4), line("cooperative_fetching", false, "unjudged", "not judged yet"), rep.checks[5]] };
    expect(checksBadge(later)).toMatchObject({ passed: 4, total: 5, na: 1 });
  });
  it("a step-0 report counts no failure; a later one does", () => {
    expect(checksBadge(report(0, false))).toMatchObject({ passed: 1, total: 2, failed: 0, warn: false });
    expect(checksBadge(report(1, false))).toMatchObject({ passed: 1, total: 2, failed: 1, warn: true });
  });
  it("a task with a check missing from the report does not hold", () => {
    const v = taskVerdicts({ tasks: [{ title: "t", checks: ["parallel", "packing"] }] }, report(1, true))!;
    expect(v[0].ok).toBe(false);
  });
  it("with an assignment, the grader's verdict and points are the task's: a hazard fails a task whose checks all pass", () => {
    const setup = { tasks: [{ title: "Parallel", checks: ["parallel"], points: 5 }, { title: "Vector", checks: ["vectorize"], points: 5 }] };
    const graded = (passed: boolean, points: number) => ({ name: "t", title: "t", passed, points, max_points: 5, messages: passed ? [] : ["race: threads 0 and 1 write A[0] with different values"] });
    const v = taskVerdicts(setup, report(2, true, { tasks: [graded(false, 0), graded(true, 5)] }))!;
    expect(v.map((t) => [t.ok, t.state])).toEqual([[false, "fail"], [true, "pass"]]);
    expect(taskPoints(setup.tasks[0], v[0].graded)).toBe(" (0/5 pts)");
    expect(taskPoints(setup.tasks[1], v[1].graded)).toBe(" (5/5 pts)");
    // step 0 is not shown as failing, though the grader gives it no points
    const first = taskVerdicts(setup, report(0, false, { tasks: [graded(false, 0), graded(false, 0)] }))!;
    expect(first.map((t) => t.state)).not.toContain("fail");
    // without the grader's verdicts, the checks decide and the points are the task's
    expect(taskPoints(setup.tasks[0], null)).toBe(" (5 pts)");
  });
  it("under a task at 0 points whose checks all pass, a line says what cost the points", async () => {
    const race = "race: threads 0 and 1 write A[0] with different values";
    const tasks = [
      { name: "par", title: "Parallel", passed: false, points: 0, max_points: 5, messages: [race] },
      { name: "vec", title: "Vector", passed: true, points: 5, max_points: 5, messages: ["Y/j_1 is vectorized 4 wide"] },
    ];
    const setup = { ...SETUP, tasks: [{ title: "Parallel", checks: ["parallel"], points: 5 }, { title: "Vector", checks: ["vectorize"], points: 5 }] };
    await mount({ checks_setup: setup, checks: report(1, true, { tasks }) });
    const [par, vec] = $$(".mlc-task");
    expect(par.querySelector(".mlc-task-title")!.textContent).toContain("(0/5 pts)");
    expect([...par.querySelectorAll(".mlc-check")].map((c) => c.querySelector(".mlc-check-mark")!.textContent)).toEqual(["✓"]);
    const cost = par.querySelector<HTMLElement>(".mlc-task-cost")!;
    expect(cost.textContent).toBe(`✗cost the points${race}`); // on the page, not only on hover
    expect(vec.querySelector(".mlc-task-cost")).toBeNull();
    // a check's own failure is its ✗ line already: not said twice
    const failing = report(1, false).checks![0];
    expect(taskCosts({ ...tasks[0], messages: [failing.message, race] }, [failing])).toEqual([race]);
    expect(taskCosts({ ...tasks[1] }, [])).toEqual([]);
  });
});
