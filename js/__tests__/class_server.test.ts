// @vitest-environment jsdom
// The class widgets: the explorer's Submit bar (shown only with a class server), the students'
// leaderboard and the teacher's dashboard, each from the plain data the kernel pushes.
import { afterEach, describe, expect, it } from "vitest";
import { class_dashboard, leaderboard } from "../classroom";
import type { Board, ClassSummary as Summary } from "../lib/model";
import widget from "../explorer";
import { fakeModel, tick } from "./fixtures";

const cleanups: Array<() => void> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
  document.body.replaceChildren();
  localStorage.clear();
});

async function explorer(traits: Record<string, unknown> = {}) {
  const model = fakeModel(traits as any);
  const el = document.createElement("div");
  document.body.append(el);
  const cleanup = (await widget.render({ model: model as any, el, signal: new AbortController().signal } as any)) as any;
  if (typeof cleanup === "function") cleanups.push(cleanup);
  return { model, el };
}

const BOARD: Board = {
  title: "Lab 1",
  max_score: 10,
  tasks: [
    { name: "parallel", title: "Run the rows in parallel", points: 5 },
    { name: "vectorize", title: "Vectorize", points: 5 },
  ],
  rows: [
    { name: "ada", rank: 1, score: 10, tasks_passed: ["parallel", "vectorize"], best_latency_ms: 0.05, submissions: 2 },
    { name: "bo", rank: 2, score: 5, tasks_passed: ["parallel"], best_latency_ms: null, submissions: 1 },
  ],
  submissions: 3,
  queued: 0,
};

function polledModel(state: Record<string, unknown>) {
  const m = fakeModel({ server: "http://127.0.0.1:1", error: "", updated: Date.now() / 1000, ...state } as any);
  return m;
}

describe("the explorer's Submit bar", () => {
  it("is not there without a class server", async () => {
    const { el } = await explorer();
    expect(el.querySelector<HTMLElement>(".mlc-class-bar")!.hidden).toBe(true);
  });

  it("submits the current step under the pseudonym and shows the verdict and the rank", async () => {
    const { model, el } = await explorer({ classroom: { server: "http://127.0.0.1:8765" }, class_submission: {} });
    const bar = el.querySelector<HTMLElement>(".mlc-class-bar")!;
    expect(bar.hidden).toBe(false);
    expect(bar.previousElementSibling!.classList.contains("mlc-toolbar")).toBe(true);
    const button = bar.querySelector<HTMLButtonElement>(".mlc-class-submit")!;
    button.click();
    await tick();
    expect(model.requests().filter((r) => r.method === "class_submit")).toEqual([]);
    expect(bar.querySelector(".mlc-class-verdict")!.textContent).toContain("type a pseudonym");

    const input = bar.querySelector<HTMLInputElement>(".mlc-class-name")!;
    input.value = "ada";
    input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
    await tick();
    expect(model.requests().at(-1)).toMatchObject({ method: "class_submit", params: { name: "ada" } });
    expect(button.disabled).toBe(true);
    model.reply({ step: 0 });
    model.set("class_submission", { state: "sending", name: "ada", step: 0, text: "grading…" });
    expect(bar.querySelector(".mlc-class-verdict")!.textContent).toBe("grading…");
    model.set("class_submission", {
      state: "graded", name: "ada", step: 0, text: "10/10 points, 0.05 ms, rank 1 of 2",
      verdict: { id: 3, status: "graded", score: 10, max_score: 10, rank: 1, students: 2, error: null },
    });
    const verdict = bar.querySelector<HTMLElement>(".mlc-class-verdict")!;
    expect(verdict.textContent).toBe("step 0: 10/10 points, 0.05 ms, rank 1 of 2");
    expect(verdict.dataset.state).toBe("graded");
    expect(verdict.dataset.rank).toBe("1");
    expect(button.disabled).toBe(false);
    expect(localStorage.getItem("mlc-lab-class-pseudonym")).toBe("ada");
  });

  it("asks for no pseudonym when the kernel holds a class token (the server knows who hands in)", async () => {
    const { model, el } = await explorer({ classroom: { server: "http://127.0.0.1:8765", identified: true }, class_submission: {} });
    const bar = el.querySelector<HTMLElement>(".mlc-class-bar")!;
    expect(bar.querySelector<HTMLInputElement>(".mlc-class-name")!.hidden).toBe(true);
    bar.querySelector<HTMLButtonElement>(".mlc-class-submit")!.click();
    await tick();
    expect(model.requests().at(-1)).toMatchObject({ method: "class_submit", params: { name: "" } });
    expect(localStorage.getItem("mlc-lab-class-pseudonym")).toBeNull();
  });

  it("shows the class's assignment, colours a verdict by its points, and sends one hand-in per double click", async () => {
    const classroom = {
      server: "http://127.0.0.1:8765",
      identified: true,
      title: "Lab 1: mm_relu on the CPU",
      tasks: [
        { name: "parallel", title: "Run the rows in parallel", points: 5, checks: ["parallel"] },
        { name: "vectorize", title: "Vectorize the inner loop", points: 5, checks: ["vectorize"] },
      ],
    };
    const { model, el } = await explorer({ classroom, class_submission: {} });
    const bar = el.querySelector<HTMLElement>(".mlc-class-bar")!;
    expect(bar.querySelector(".mlc-class-assignment-title")!.textContent).toBe("Lab 1: mm_relu on the CPU");
    const chips = () => [...bar.querySelectorAll<HTMLElement>(".mlc-class-task")].map((c) => [c.textContent, c.dataset.verdict ?? ""]);
    expect(chips()).toEqual([["parallel · 5 pts", ""], ["vectorize · 5 pts", ""]]);
    // a double click: two requests, one client id (the server stores one submission)
    const button = bar.querySelector<HTMLButtonElement>(".mlc-class-submit")!;
    button.click();
    await tick();
    model.reply({ step: 0 });
    await tick();
    button.disabled = false; // a fast refusal re-enables it between the two clicks
    button.click();
    await tick();
    const sent = model.requests().filter((r) => r.method === "class_submit");
    expect(sent.length).toBe(2);
    expect(sent[0].params.client_id).toBeTruthy();
    expect(sent[1].params.client_id).toBe(sent[0].params.client_id);
    model.reply({ step: 0 });
    // 0 of 10 points is no success: red, and each task's chip says how it went
    model.set("class_submission", {
      state: "graded", name: "ada", step: 0, text: "0/10 points, rank 1 of 1, failed: parallel, vectorize",
      verdict: { id: 1, name: "ada", task: null, status: "graded", submitted_at: 0, score: 0, max_score: 10, rank: 1, students: 1, error: null,
        tasks: [
          { name: "parallel", title: null, points: 0, max_points: 5, passed: false, messages: [] },
          { name: "vectorize", title: null, points: 0, max_points: 5, passed: false, messages: [] },
        ] },
    });
    const verdict = bar.querySelector<HTMLElement>(".mlc-class-verdict")!;
    expect(verdict.dataset.verdict).toBe("fail");
    expect(chips()).toEqual([["✗ parallel · 5 pts", "fail"], ["✗ vectorize · 5 pts", "fail"]]);
    model.set("class_submission", {
      state: "graded", name: "ada", step: 1, text: "5/10 points",
      verdict: { id: 2, name: "ada", task: null, status: "graded", submitted_at: 0, score: 5, max_score: 10, error: null,
        tasks: [
          { name: "parallel", title: null, points: 5, max_points: 5, passed: true, messages: [] },
          { name: "vectorize", title: null, points: 0, max_points: 5, passed: false, messages: [] },
        ] },
    });
    expect(verdict.dataset.verdict).toBe("partial");
    expect(chips()[0]).toEqual(["✓ parallel · 5 pts", "pass"]);
    // a later, separate click is a new intent
    await new Promise((r) => setTimeout(r, 1600));
    button.disabled = false;
    button.click();
    await tick();
    const third = model.requests().filter((r) => r.method === "class_submit").at(-1)!;
    expect(third.params.client_id).not.toBe(sent[0].params.client_id);
  });

  it("shows a refusal and keeps the button usable", async () => {
    const { model, el } = await explorer({ classroom: { server: "http://127.0.0.1:8765" }, class_submission: {} });
    const input = el.querySelector<HTMLInputElement>(".mlc-class-name")!;
    input.value = "ada";
    el.querySelector<HTMLButtonElement>(".mlc-class-submit")!.click();
    await tick();
    model.reply({ summary: "the class server at http://127.0.0.1:8765 cannot be reached (refused)" }, false);
    await tick();
    const verdict = el.querySelector<HTMLElement>(".mlc-class-verdict")!;
    expect(verdict.dataset.state).toBe("error");
    expect(verdict.textContent).toContain("cannot be reached");
    expect(el.querySelector<HTMLButtonElement>(".mlc-class-submit")!.disabled).toBe(false);
  });
});

describe("the leaderboard", () => {
  it("lists students by rank, marks yours, and re-draws on new figures", () => {
    const model = polledModel({ board: BOARD, highlight: "bo" });
    const el = document.createElement("div");
    cleanups.push(leaderboard.render({ model: model as any, el } as any) as any);
    const rows = [...el.querySelectorAll<HTMLElement>(".mlc-board-row")];
    expect(rows.map((r) => r.dataset.name)).toEqual(["ada", "bo"]);
    expect(rows[0].querySelector(".mlc-board-latency")!.textContent).toBe("50.0 µs");
    expect(rows[1].querySelector(".mlc-board-latency")!.textContent).toBe("–");
    expect(rows[1].classList.contains("mlc-board-you")).toBe(true);
    expect(rows[1].querySelectorAll(".mlc-chip-ok").length).toBe(1);
    model.set("board", { ...BOARD, rows: [...BOARD.rows!, { name: "cy", rank: 3, score: 0, tasks_passed: [], best_latency_ms: null, submissions: 1 }] });
    expect(el.querySelectorAll(".mlc-board-row").length).toBe(3);
    model.set("error", "the class server at http://127.0.0.1:1 cannot be reached");
    expect(el.querySelector(".mlc-class-error")!.textContent).toContain("cannot be reached");
    (el.querySelector(".mlc-class-refresh") as HTMLButtonElement).click();
    expect(model.requests().at(-1)).toMatchObject({ method: "class_refresh" });
  });
});

describe("the teacher's dashboard", () => {
  const SUMMARY: Summary = {
    title: "Lab 1",
    students: 3,
    submissions: 6,
    queued: 1,
    tasks: [
      { name: "parallel", title: "Run the rows in parallel", passed: 2, students: 3, pass_rate: 2 / 3 },
      { name: "vectorize", title: "Vectorize", passed: 1, students: 3, pass_rate: 1 / 3 },
    ],
    latency: { students: [{ name: "ada", latency_ms: 0.05 }, { name: "bo", latency_ms: 0.2 }], min: 0.05, median: 0.125, max: 0.2 },
    common_failures: [{ task: "vectorize", message: "no loop is vectorized", count: 4, students: 2 }, { task: null, message: "the trace is refused", count: 1, students: 1 }],
    stuck: [
      { name: "cy", task: "parallel", failed_attempts: 3, stuck: true, last_message: "the trace is refused" },
      { name: "bo", task: "vectorize", failed_attempts: 1, stuck: false, last_message: "no loop is vectorized" },
    ],
  };

  it("shows pass rates, the latency distribution, the common failures, who is stuck and the board", () => {
    const model = polledModel({ summary: SUMMARY, board: BOARD });
    const el = document.createElement("div");
    cleanups.push(class_dashboard.render({ model: model as any, el } as any) as any);
    expect(el.querySelector(".mlc-class-counts")!.textContent).toBe("3 students · 6 submissions · 1 being graded");
    const rates = [...el.querySelectorAll<HTMLElement>(".mlc-rate")];
    expect(rates.map((r) => [r.dataset.task, r.querySelector(".mlc-rate-text")!.textContent])).toEqual([
      ["parallel", "2/3 (67%)"],
      ["vectorize", "1/3 (33%)"],
    ]);
    expect(rates[0].querySelector<HTMLElement>(".mlc-rate-fill")!.style.width).toBe("67%");
    expect([...el.querySelectorAll<SVGElement>(".mlc-latency-dot")].map((d) => d.dataset.name)).toEqual(["ada", "bo"]);
    expect(el.querySelector(".mlc-latency-legend")!.textContent).toContain("median 125.0 µs");
    const failures = [...el.querySelectorAll(".mlc-failures tbody tr")].map((r) => r.textContent);
    expect(failures[0]).toBe("vectorizeno loop is vectorized24");
    expect(failures[1]).toContain("(not graded)");
    const stuck = [...el.querySelectorAll<HTMLElement>(".mlc-stuck-row")];
    expect(stuck.map((r) => [r.dataset.name, r.dataset.task, r.classList.contains("mlc-stuck")])).toEqual([
      ["cy", "parallel", true],
      ["bo", "vectorize", false],
    ]);
    expect(el.querySelectorAll(".mlc-sec-board .mlc-board-row").length).toBe(2);
    model.set("summary", { ...SUMMARY, students: 4 });
    expect(el.querySelector(".mlc-class-counts")!.textContent).toContain("4 students");
  });

  it("plots latencies on an axis from zero with names, values, spread and load; ties share a rank; a refused hand-in is flagged", () => {
    const summary: Summary = {
      ...SUMMARY,
      latency: {
        students: [
          { name: "bo", latency_ms: 0.1455, spread_ms: 0.002, load: 0.1, quiet: true, rank: 1, tie: true },
          { name: "ada", latency_ms: 0.1465, spread_ms: 0.0015, load: 0.2, quiet: true, rank: 1, tie: true },
          { name: "cy", latency_ms: 0.2928, spread_ms: 0.001, load: 2.1, quiet: false, rank: 3, tie: false },
        ],
        min: 0.1455, median: 0.1465, max: 0.2928,
      },
      refused: [{ id: 7, name: "Eve E (eve)", pseudonym: "student 5", kind: "attack", why: "calls __import__", file: "lab.py", message: "lab.py: the trace is refused: line 1 calls __import__", at: 0 }],
    };
    const board: Board = {
      ...BOARD,
      rows: [
        { name: "bo", rank: 1, tie: true, score: 10, tasks_passed: [], best_latency_ms: 0.1455, spread_ms: 0.002, load: 0.1, quiet: true, submissions: 1 },
        { name: "ada", rank: 1, tie: true, score: 10, tasks_passed: [], best_latency_ms: 0.1465, spread_ms: 0.0015, load: 0.2, quiet: true, submissions: 1 },
        { name: "cy", rank: 3, score: 10, tasks_passed: [], best_latency_ms: 0.2928, spread_ms: 0.001, load: 2.1, quiet: false, submissions: 1 },
      ],
    };
    const model = polledModel({ summary, board });
    const el = document.createElement("div");
    cleanups.push(class_dashboard.render({ model: model as any, el } as any) as any);
    const rows = [...el.querySelectorAll<HTMLElement>(".mlc-sec-latency .mlc-latency-row[data-name]")];
    // names and values on the page, not on hover; bars from zero: 145.5 µs and 146.5 µs are nearly the same length
    expect(rows.map((r) => [r.querySelector(".mlc-latency-rank")!.textContent, r.querySelector(".mlc-latency-name")!.textContent, r.querySelector(".mlc-latency-value")!.textContent])).toEqual([
      ["=1", "bo", "145.5 µs ± 2.0 µs"],
      ["=1", "ada", "146.5 µs ± 1.5 µs"],
      ["3", "cy", "292.8 µs ± 1.0 µs"],
    ]);
    const width = (r: HTMLElement) => parseFloat(r.querySelector<HTMLElement>(".mlc-latency-dot")!.style.width);
    expect(width(rows[1]) / width(rows[0])).toBeCloseTo(146.5 / 145.5, 3);
    expect(width(rows[2]) / width(rows[0])).toBeCloseTo(292.8 / 145.5, 3);
    const ticks = [...el.querySelectorAll(".mlc-latency-tick")].map((t) => t.textContent);
    expect(ticks[0]).toBe("0");
    expect(ticks.at(-1)).toBe("300.0 µs");
    expect(rows[2].classList.contains("mlc-latency-busy")).toBe(true);
    expect(rows[2].querySelector(".mlc-latency-load")!.textContent).toBe("⚠ busy machine, load 2.1");
    expect(rows[0].querySelector(".mlc-latency-load")!.textContent).toBe("load 0.1");
    // the leaderboard: ties marked, each latency with its spread and load
    const board_rows = [...el.querySelectorAll<HTMLElement>(".mlc-sec-board .mlc-board-row")];
    expect(board_rows.map((r) => r.querySelector(".mlc-board-rank")!.textContent)).toEqual(["=1", "=1", "3"]);
    expect(board_rows[2].querySelector(".mlc-board-latency")!.textContent).toBe("292.8 µs ± 1.0 µs ⚠ busy machine, load 2.1");
    // the refused hand-in, flagged above the failures
    const refused = el.querySelector<HTMLElement>(".mlc-sec-refused")!;
    expect(refused.querySelector("h4")!.textContent).toContain("Refused hand-ins (1, 1 attack)");
    expect(refused.querySelector(".mlc-refused-row")!.textContent).toContain("__import__");
    expect(refused.compareDocumentPosition(el.querySelector(".mlc-sec-failures")!) & Node.DOCUMENT_POSITION_FOLLOWING).toBeTruthy();
  });

  it("tells an attack from an honest mistake in the refused list, names the student and the pseudonym the class sees", () => {
    const summary: Summary = {
      ...SUMMARY,
      refused: [
        { id: 9, name: "Bo Kim (bo02)", pseudonym: "student 2", kind: "mistake", why: "", file: "step 3", message: "step 3: the trace is refused: line 4: `splitt` is not a schedule primitive", at: 2 },
        { id: 8, name: "Mal Ory (mal)", pseudonym: "owl", kind: "attack", why: "calls __import__", file: "lab1.py", message: "lab1.py: the trace is refused: line 5: only methods of `sch` may be called", at: 1 },
      ],
    };
    const model = polledModel({ summary, board: BOARD });
    const el = document.createElement("div");
    cleanups.push(class_dashboard.render({ model: model as any, el } as any) as any);
    const section = el.querySelector<HTMLElement>(".mlc-sec-refused")!;
    expect(section.classList.contains("mlc-has-attacks")).toBe(true);
    expect(section.querySelector("h4")!.textContent).toBe("⚠ Refused hand-ins (2, 1 attack): look at these");
    expect([...section.querySelectorAll("th")].map((t) => t.textContent)).toEqual(["Student", "What it was", "Hand-in", "Why the grader refused it"]);
    const rows = [...section.querySelectorAll<HTMLElement>(".mlc-refused-row")];
    // attacks first; each row says which it was, in words
    expect(rows.map((r) => [r.dataset.kind, r.querySelector(".mlc-refused-kind")!.textContent])).toEqual([
      ["attack", "⚠ attack: calls __import__"],
      ["mistake", "a mistake"],
    ]);
    expect(rows[0].querySelector("td")!.textContent).toBe("Mal Ory (mal) · owl");
    expect(rows[1].children[2].textContent).toBe("#9 step 3"); // the hand-in's name as the student sent it
    expect(el.querySelector(".mlc-stuck-table th")!.textContent).toBe("Student");
    model.set("summary", { ...summary, refused: [summary.refused![0]] });
    const only = el.querySelector<HTMLElement>(".mlc-sec-refused")!;
    expect(only.classList.contains("mlc-has-attacks")).toBe(false);
    expect(only.querySelector("h4")!.textContent).toBe("Refused hand-ins (1): honest mistakes");
  });
});
