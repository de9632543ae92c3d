// The explorer's Submit bar, shown when the explorer was given a class server: a pseudonym field
// (only on a demo server: with a class token in the kernel, `classroom.identified`, the server
// knows who hands in) and a Submit button that hands in the current step's trace (the kernel sends Session.submission()
// to the server), then the verdict and the rank. Traits: `classroom` ({"server"}) and
// `class_submission` (mlc_lab/widgets/classroom.py).

import type { AnyModel } from "@anywidget/types";
import { h } from "../lib/dom";
import { Rpc, RpcFailure } from "../lib/rpc";
import type { ExplorerTraits } from "../lib/model";

/** The explorer's traits the Submit bar reads (mlc_lab.model.traits.ExplorerTraits). */
export type SubmitModel = Pick<ExplorerTraits, "classroom" | "class_submission">;

const NAME_KEY = "mlc-lab-class-pseudonym";
/** Clicks this close together are one intent: they send the same client id, and the server stores one submission. */
export const SAME_INTENT_MS = 1500;

/** How a graded verdict reads: every point ("pass"), some ("partial"), none or not graded ("fail"). */
export function verdictClass(v: { score?: number | null; max_score?: number | null; error?: string | null } | undefined): "pass" | "partial" | "fail" {
  if (!v || v.error) return "fail";
  const score = v.score ?? 0;
  const max = v.max_score ?? 0;
  if (max > 0 && score >= max) return "pass";
  return score > 0 ? "partial" : "fail";
}

function newId(): string {
  const c = globalThis.crypto as Crypto | undefined;
  return c?.randomUUID ? c.randomUUID() : `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
}

export class SubmitBar {
  readonly el: HTMLElement;
  private readonly nameInput: HTMLInputElement;
  private readonly button: HTMLButtonElement;
  private readonly verdict: HTMLElement;
  private readonly assignment: HTMLElement;
  private intent: { id: string; at: number } | null = null;
  private readonly rpc: Rpc;
  private readonly redraw = () => this.draw();

  constructor(private readonly model: AnyModel<SubmitModel>) {
    this.rpc = new Rpc(model as any);
    this.nameInput = h("input", { class: "mlc-class-name", type: "text", placeholder: "your pseudonym", maxlength: "40", spellcheck: "false", "aria-label": "pseudonym" });
    try {
      this.nameInput.value = globalThis.localStorage?.getItem(NAME_KEY) ?? "";
    } catch {
      /* storage blocked: the field starts empty */
    }
    this.nameInput.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter") {
        ev.preventDefault();
        void this.submit();
      }
    });
    this.button = h("button", { class: "mlc-class-submit", title: "Hand in this step's schedule to the class server", onclick: () => void this.submit() }, "Submit");
    this.verdict = h("span", { class: "mlc-class-verdict", role: "status" });
    this.assignment = h("span", { class: "mlc-class-assignment" });
    this.el = h("div", { class: "mlc-class-bar" }, h("span", { class: "mlc-class-label" }, "Class:"), this.assignment, this.nameInput, this.button, this.verdict);
    model.on("change:classroom", this.redraw);
    model.on("change:class_submission", this.redraw);
    this.draw();
  }

  async submit(): Promise<void> {
    const identified = !!this.model.get("classroom")?.identified;
    const name = identified ? "" : this.nameInput.value.trim();
    if (!name && !identified) {
      this.show("error", "type a pseudonym first: it is your name on the leaderboard");
      this.nameInput.focus();
      return;
    }
    try {
      if (name) globalThis.localStorage?.setItem(NAME_KEY, name);
    } catch {
      /* not kept: fine */
    }
    const now = Date.now();
    if (!this.intent || now - this.intent.at > SAME_INTENT_MS) this.intent = { id: newId(), at: now };
    else this.intent.at = now; // a double click: the same hand-in again, which the server stores once
    this.button.disabled = true;
    this.show("sending", "sending…");
    try {
      await this.rpc.call("class_submit", { name, client_id: this.intent.id });
    } catch (err) {
      this.show("error", err instanceof RpcFailure ? err.message : String(err));
      this.button.disabled = false;
    }
  }

  private show(state: string, text: string, verdict?: string): void {
    this.verdict.dataset.state = state;
    if (verdict) this.verdict.dataset.verdict = verdict;
    else delete this.verdict.dataset.verdict;
    this.verdict.textContent = text;
    this.verdict.title = text;
  }

  private draw(): void {
    const server = this.model.get("classroom")?.server;
    this.el.hidden = !server;
    this.nameInput.hidden = !!this.model.get("classroom")?.identified;
    this.el.title = server ? `class server: ${server}` : "";
    const sub = this.model.get("class_submission") ?? {};
    this.drawAssignment(sub.state === "graded" ? sub.verdict : undefined);
    if (!sub.state) return;
    this.button.disabled = sub.state === "sending";
    const v = sub.verdict;
    let text = sub.text ?? "";
    if (sub.state === "graded" && v && !v.error && sub.step !== undefined) text = `step ${sub.step}: ${text}`;
    this.show(sub.state === "graded" && v?.error ? "error" : sub.state, text, sub.state === "graded" ? verdictClass(v) : undefined);
    if (v?.rank) this.verdict.dataset.rank = String(v.rank);
    else delete this.verdict.dataset.rank;
  }

  /** The class's assignment: its title and a chip per task (points; coloured by the last verdict). */
  private drawAssignment(v: { tasks?: { name: string; passed: boolean | null }[] } | undefined): void {
    const info = this.model.get("classroom") ?? {};
    const tasks = info.tasks ?? [];
    const verdicts = new Map((v?.tasks ?? []).map((t) => [t.name, t.passed]));
    this.assignment.replaceChildren(
      ...(info.title ? [h("b", { class: "mlc-class-assignment-title" }, info.title)] : []),
      ...tasks.map((t) => {
        const passed = verdicts.get(t.name);
        const state = passed === true ? "pass" : passed === false ? "fail" : "";
        return h(
          "span",
          { class: "mlc-class-task", dataset: { task: t.name, ...(state ? { verdict: state } : {}) }, title: `${t.title}: checks ${t.checks.join(", ")}` },
          `${passed === true ? "✓ " : passed === false ? "✗ " : ""}${t.name} · ${Number.isInteger(t.points) ? t.points : t.points.toFixed(1)} pts`,
        );
      }),
      ...(info.assignment_error ? [h("span", { class: "mlc-class-assignment-error", title: info.assignment_error }, "⚠ assignment unknown")] : []),
    );
  }

  dispose(): void {
    this.model.off("change:classroom", this.redraw);
    this.model.off("change:class_submission", this.redraw);
    this.rpc.dispose();
    this.el.remove();
  }
}
