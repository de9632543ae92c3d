// The explorer's Checks panel: the named checks of the current step (✓/✗, one sentence each, the
// figures behind it on hover, a click selects the loop or block it is about), grouped by task when a
// task list was given, the step's hazards above them, and the ⚠ marks of the history. Python side:
// mlc_lab/widgets/checks.py (traits checks_setup, checks, hazards; the report of a step arrives
// after the step's own state). A saved view shows the report recorded for a step, or says that the
// step's checks need a kernel.

import { h } from "../lib/dom";
import { type CheckLine, type ChecksSetup, type ChecksTask, HAZARD_KINDS, type HazardInfo, type StepChecks, type StepHazards, type TaskVerdict } from "../lib/model";
import { Panel } from "../lib/panel";
import type { StepId } from "../lib/types";

// The panel's wire is generated from mlc_lab/model/checks/__init__.py (js/lib/model.ts).
export type { CheckLine, ChecksSetup, HazardInfo, StepChecks, StepHazards } from "../lib/model";

/** What the page calls a hazard's kind. */
export const hazardName = (kind: string): string => (HAZARD_KINDS as Record<string, string>)[kind] ?? kind;

const NO_KERNEL = "need a running kernel: this saved view recorded the checks of the steps shown while it ran. Re-run the notebook to check this one.";

// ---- pure helpers (tested without a DOM) -------------------------------------------------------

/** The figures behind a verdict, one per line ("key: value", nested tables indented). */
export function evidenceText(evidence: unknown, indent = ""): string {
  if (!evidence || typeof evidence !== "object" || Array.isArray(evidence)) return `${indent}${formatValue(evidence)}`;
  const lines: string[] = [];
  for (const [key, value] of Object.entries(evidence as Record<string, unknown>)) {
    const label = key.replace(/_/g, " ");
    if (value && typeof value === "object" && !Array.isArray(value)) lines.push(`${indent}${label}:`, evidenceText(value, `${indent}  `));
    else lines.push(`${indent}${label}: ${formatValue(value)}`);
  }
  return lines.join("\n");
}

function formatValue(v: unknown): string {
  if (Array.isArray(v)) return v.every((x) => typeof x === "number") && v.length > 1 && v.length <= 4 ? v.join("x") : v.map(formatValue).join(", ");
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : String(Math.round(v * 1000) / 1000);
  if (v && typeof v === "object") return JSON.stringify(v);
  return String(v);
}

/** Whether a report is about the step shown. */
export function reportFor(report: StepChecks | Record<string, never> | null | undefined, step: StepId): StepChecks | null {
  return report && "step" in report && String(report.step) === String(step) ? (report as StepChecks) : null;
}

/** Whether a report is of the original program (step 0, no schedule step applied yet): its checks are
 * "not judged yet", never a row of failures. */
export const isOpening = (report: StepChecks | null): boolean => !!report && String(report.step) === "0";

/** How a check's line reads: passed, failed, could not judge (neither ✓ nor ✗), or, on the original
 * program, not judged yet. */
export type LineState = "pass" | "fail" | "unjudged" | "todo";

export function lineState(c: CheckLine, opening = false): LineState {
  const v = c.verdict ?? (c.ok ? "pass" : "fail");
  return opening && v === "fail" ? "todo" : v;
}

const MARK: Record<LineState, string> = { pass: "✓", fail: "✗", unjudged: "–", todo: "○" };
export const lineMark = (state: LineState): string => MARK[state];

/** A check that cannot apply to this program at any step (no reduction, nothing of what it judges):
 *  listed, but not one of the checks a step could pass. */
export const doesNotApply = (c: CheckLine): boolean => c.verdict === "unjudged" && (c.evidence as Record<string, unknown> | undefined)?.reason === "does not apply";

/** "4/5", the checks that failed and the hazards, for the tab's label; `warn` when it should read red
 * (a failure past step 0, or a hazard). A check that does not apply is not counted ("5/6" read as one
 * missing when the sixth could never hold); `na` says how many were left out. */
export function checksBadge(report: StepChecks | null): { passed: number; total: number; failed: number; hazards: number; na: number; warn: boolean } | null {
  if (!report || report.error || !report.checks) return null;
  const opening = isOpening(report);
  const failed = report.checks.filter((c) => lineState(c, opening) === "fail").length;
  const hazards = report.hazards?.length ?? 0;
  const na = report.checks.filter(doesNotApply).length;
  return { passed: report.checks.filter((c) => c.ok).length, total: report.checks.length - na, failed, hazards, na, warn: failed > 0 || hazards > 0 };
}

/** The tasks with their verdicts, or null without tasks. With an assignment the kernel scores each
 * task as `mlc-lab grade` does (`report.tasks`: hazards and points included), and that verdict is the
 * one shown; otherwise a task holds when each of its checks does and fails when one fails. A task that
 * fails only because a check could not judge is not judged; at step 0 nothing reads as failing. */
export function taskVerdicts(
  setup: ChecksSetup,
  report: StepChecks,
): Array<{ task: ChecksTask; ok: boolean; state: LineState; lines: CheckLine[]; graded: TaskVerdict | null }> | null {
  if (!setup.tasks?.length) return null;
  const byName = new Map((report.checks ?? []).map((c) => [c.name, c]));
  const opening = isOpening(report);
  return setup.tasks.map((task, i) => {
    const lines = task.checks.map((n) => byName.get(n)).filter((c): c is CheckLine => !!c);
    const graded = report.tasks?.length === setup.tasks?.length ? (report.tasks?.[i] ?? null) : null;
    const checksHold = lines.length === task.checks.length && lines.every((c) => c.ok);
    const ok = graded ? graded.passed === true : checksHold;
    const states = lines.map((c) => lineState(c, opening));
    // all its checks pass and the grader still fails it: a hazard or the numbers (its messages say which)
    const failedBeyondChecks = !ok && !opening && checksHold;
    const state: LineState = ok ? "pass" : states.includes("fail") || failedBeyondChecks ? "fail" : states.includes("todo") ? "todo" : "unjudged";
    return { task, ok, state, lines, graded };
  });
}

/** What cost a failed task its points beyond its check lines (a hazard, wrong numbers, a latency
 * threshold, a check that could not judge): the grader's sentences that no ✗ line of the task says. */
export function taskCosts(graded: TaskVerdict | null, lines: CheckLine[]): string[] {
  if (!graded || graded.passed !== false) return [];
  const said = new Set(lines.filter((c) => !c.ok).map((c) => c.message));
  return (graded.messages ?? []).filter((m) => !said.has(m));
}

/** " (5/5 pts)" as the grader scores the step, or the task's points when nothing was scored. */
export function taskPoints(task: ChecksTask, graded: TaskVerdict | null): string {
  if (graded && graded.max_points != null) return ` (${graded.points ?? 0}/${graded.max_points} pts)`;
  return task.points ? ` (${task.points} pts)` : "";
}

/** The steps after `from` on the way to `to` (in order, `to` included), or null when `to` does not
 * descend from `from` (another branch: what became of the hazard there is not this row's business). */
export function pathAfter(steps: Array<{ id: StepId; parent: StepId | null }>, from: StepId, to: StepId): StepId[] | null {
  const parent = new Map(steps.map((s) => [String(s.id), s.parent]));
  const out: StepId[] = [];
  let at: StepId | null | undefined = to;
  while (at !== null && at !== undefined && String(at) !== String(from)) {
    out.unshift(at);
    at = parent.get(String(at));
  }
  return at === null || at === undefined ? null : out;
}

const same = (a: HazardInfo, b: HazardInfo) => a.kind === b.kind && (a.where ?? null) === (b.where ?? null);

/** The ⚠ of a history row: the hazards the step created (its hover text), or null. With `later` (the
 * steps after it up to the current one, and the hazards map), each hazard says whether it is still
 * there or at which step it was resolved; a row whose hazards are all resolved is marked as such. */
export function hazardMark(
  entry: StepHazards | undefined,
  later: { path: StepId[] | null; hazards: Record<string, StepHazards | undefined> } | null = null,
): { text: string; title: string; resolved: boolean } | null {
  const made = entry?.new ?? [];
  if (!made.length) return null;
  const fate = made.map((z) => {
    if (!later?.path) return "";
    const at = later.path.find((sid) => (later.hazards[String(sid)]?.resolved ?? []).some((r) => same(r, z)));
    return at !== undefined ? ` (resolved at step ${at})` : " (still there)";
  });
  const resolved = !!later?.path && fate.every((f) => f.startsWith(" (resolved"));
  return {
    text: made.length > 1 ? `⚠${made.length}` : "⚠",
    title:
      `This step ${resolved ? "created" : "creates"} ${made.length === 1 ? "a hazard" : `${made.length} hazards`}${resolved ? ", since resolved" : ""}:\n` +
      made.map((z, i) => `• ${hazardName(z.kind)}: ${z.message}${fate[i]}`).join("\n"),
    resolved,
  };
}

// ---- the panel ---------------------------------------------------------------------------------

export interface ChecksPanelHost {
  /** Select a loop or block by its name (the tree, the code, the primitives follow). */
  pick(name: string): void;
  /** A saved view: the recorded report of a step, or null when none was recorded. */
  recorded(step: StepId): Promise<StepChecks | null>;
}

export interface ChecksState {
  setup: ChecksSetup;
  report: StepChecks | Record<string, never> | null;
  step: StepId;
  live: boolean;
}

export class ChecksPanel extends Panel<[state: ChecksState]> {
  readonly el: HTMLElement;
  private last: StepChecks | null = null; // the last report shown (kept, dimmed, while the next is computed)
  private offline = new Map<string, StepChecks | null | "pending">();
  private step: StepId | null = null; // the step last asked about
  private shown = "";
  /** The report shown (null when none is: pending, or none recorded). */
  report: StepChecks | null = null;

  constructor(private readonly host: ChecksPanelHost) {
    super();
    this.el = h("div", { class: "mlc-checks", role: "region", "aria-label": "Checks" });
  }

  /** Draw the checks of `state.step` (`report` says which report is shown). */
  show(state: ChecksState): void {
    this.report = this.drawState(state);
  }

  private drawState(state: ChecksState): StepChecks | null {
    const { setup, step, live } = state;
    if (!setup.available) {
      this.draw(`none`, [h("div", { class: "mlc-muted mlc-checks-note" }, "This session has no named checks (it is not a mlc_lab Session).")]);
      return null;
    }
    let report = reportFor(state.report, step);
    if (!report && !live) {
      const key = String(step);
      if (!this.offline.has(key)) {
        this.offline.set(key, "pending");
        void this.host
          .recorded(step)
          .catch(() => null)
          .then((rec) => {
            this.offline.set(key, rec);
            if (String(this.step) === key && !this.isDisposed) this.show(state);
          });
      }
      this.step = step;
      const rec = this.offline.get(key);
      if (rec === "pending") return null;
      if (!rec) {
        this.draw(`nokernel:${key}`, [this.head(setup, null), h("div", { class: "mlc-muted mlc-checks-note mlc-checks-nokernel" }, `The checks of step ${key} ${NO_KERNEL}`)]);
        return null;
      }
      report = rec;
    }
    this.step = step;
    if (report) this.last = report;
    const pending = !report;
    const shown = report ?? this.last;
    const key = `${pending}:${JSON.stringify(setup)}:${JSON.stringify(shown)}:${step}`;
    if (key === this.shown) return report;
    const body: HTMLElement[] = [this.head(setup, report, pending ? step : null)];
    if (shown?.error) body.push(h("div", { class: "mlc-checks-error mlc-error-text" }, shown.error));
    else if (shown) body.push(...this.lines(setup, shown, pending));
    this.draw(key, body);
    return report;
  }

  private draw(key: string, children: HTMLElement[]): void {
    this.shown = key;
    this.el.replaceChildren(...children);
  }

  private head(setup: ChecksSetup, report: StepChecks | null, pendingStep: StepId | null = null): HTMLElement {
    const target = report?.target ?? setup.target;
    const badge = checksBadge(report);
    return h(
      "div",
      { class: "mlc-checks-head" },
      setup.title ? h("div", { class: "mlc-checks-title" }, setup.title) : null,
      h(
        "div",
        { class: "mlc-muted" },
        target ? `${target === "cuda" ? "GPU (CUDA)" : "CPU"} checks` : "Checks",
        report ? ` of step ${report.step}` : "",
        badge ? `: ${badge.passed} of ${badge.total} hold${badge.na ? `, ${badge.na} ${badge.na === 1 ? "does" : "do"} not apply` : ""}` : "",
        report?.ms !== undefined ? h("span", { class: "mlc-checks-ms", title: "time the kernel took to check this step" }, ` (${Math.round(report.ms)} ms)`) : null,
        pendingStep !== null ? h("span", { class: "mlc-checks-pending" }, ` checking step ${pendingStep}…`) : null,
      ),
    );
  }

  private lines(setup: ChecksSetup, report: StepChecks, stale: boolean): HTMLElement[] {
    const out: HTMLElement[] = [];
    const hazards = report.hazards ?? [];
    if (hazards.length)
      out.push(
        h(
          "div",
          { class: "mlc-hazards" },
          h("div", { class: "mlc-checks-group" }, `Hazards (${hazards.length})`),
          ...hazards.map((z) =>
            this.line(
              { cls: "mlc-hazard", mark: "⚠", title: hazardName(z.kind), message: z.message, where: z.where, hover: `${hazardName(z.kind)}: ${z.message}` },
              { hazard: z.kind },
            ),
          ),
        ),
      );
    const tasks = taskVerdicts(setup, report);
    const opening = isOpening(report);
    const checkLine = (c: CheckLine) => {
      const state = lineState(c, opening);
      const note = state === "todo" ? "not judged yet: this is the original program, before any schedule step\n\n" : "";
      return this.line(
        { cls: `mlc-check mlc-check-${state === "pass" ? "ok" : state}`, mark: lineMark(state), title: c.title, message: c.message, where: c.where, hover: `${note}${evidenceText(c.evidence)}` },
        { check: c.name, verdict: state },
      );
    };
    if (tasks) {
      for (const { task, state, lines, graded } of tasks)
        out.push(
          h(
            "div",
            { class: `mlc-task mlc-task-${state === "pass" ? "ok" : state}`, title: graded && !graded.passed ? (graded.messages ?? []).join("\n") : "" },
            h("div", { class: "mlc-task-title" }, h("span", { class: "mlc-check-mark" }, lineMark(state)), " ", task.title, taskPoints(task, graded) ? h("span", { class: "mlc-muted" }, taskPoints(task, graded)) : null),
            ...lines.map(checkLine),
            ...taskCosts(graded, lines).map((m) => h("div", { class: "mlc-task-cost" }, h("span", { class: "mlc-check-mark" }, "✗"), h("span", { class: "mlc-check-name" }, "cost the points"), h("span", { class: "mlc-check-message" }, m))),
          ),
        );
    } else out.push(...(report.checks ?? []).map(checkLine));
    if (!report.checks?.length && !hazards.length) out.push(h("div", { class: "mlc-muted mlc-checks-note" }, "No named check applies to this program yet."));
    const wrap = h("div", { class: `mlc-checks-body${stale ? " mlc-stale" : ""}` }, ...out);
    return [wrap];
  }

  private line(
    l: { cls: string; mark: string; title: string; message: string; where: string | null; hover: string },
    data: Record<string, string>,
  ): HTMLElement {
    const where = l.where;
    return h(
      "div",
      {
        class: `${l.cls}${where ? " mlc-check-link" : ""}`,
        dataset: { ...data, ...(where ? { where } : {}) },
        title: `${l.hover}${where ? `\n\n(click: select ${where})` : ""}`,
        onclick: where ? () => this.host.pick(where) : undefined,
      },
      h("span", { class: "mlc-check-mark" }, l.mark),
      h("span", { class: "mlc-check-name" }, l.title),
      h("span", { class: "mlc-check-message" }, l.message),
    );
  }
}
