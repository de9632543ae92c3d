// The trace panel: TVM's trace in an editable CodeMirror 6 view, "replay" with the error shown at
// its line, the sampled decisions as knobs, import/export and "copy as Python".

import { defaultKeymap, history, historyKeymap } from "@codemirror/commands";
import { cachedPython } from "../lib/cached_python";
import { EditorState, StateEffect, StateField } from "@codemirror/state";
import { Decoration, EditorView, keymap, lineNumbers } from "@codemirror/view";
import { h, moreRoomButton } from "../lib/dom";
import { Panel } from "../lib/panel";
import { minimalChange } from "./code";
import { jpCodeTheme } from "../lib/cm_theme";
import type { Decision } from "../lib/types";

const setErrorLine = StateEffect.define<number | null>();
const errorLineField = StateField.define<number | null>({
  create: () => null,
  update(v, tr) {
    for (const e of tr.effects) if (e.is(setErrorLine)) return e.value;
    return tr.docChanged ? null : v;
  },
  provide: (f) =>
    EditorView.decorations.from(f, (line) => (view: EditorView) => {
      if (!line || line > view.state.doc.lines) return Decoration.none;
      const from = view.state.doc.line(line).from;
      return Decoration.set([Decoration.line({ class: "mlc-line-error" }).range(from)]);
    }) as never,
});

/** How a decision value is written in a list of choices. */
export function formatChoice(value: unknown): string {
  return Array.isArray(value) ? `[${value.join(", ")}]` : String(value);
}

export function choiceIndex(d: Decision): number {
  const key = formatChoice(d.value);
  return (d.choices ?? []).findIndex((c) => formatChoice(c) === key);
}

export interface TraceHandlers {
  replay(text: string): void;
  setDecision(index: number, value: unknown): void;
  exportTrace(format: "json" | "text" | "python"): void;
  importTrace(text: string, filename: string): void;
}

export class TracePanel extends Panel<[]> {
  readonly el: HTMLElement;
  private editor: EditorView;
  private pristine = "";
  private knobs: HTMLElement;
  private decisionsTitle: HTMLElement;
  private status: HTMLElement;

  constructor(private handlers: TraceHandlers) {
    super();
    this.el = h("div", { class: "mlc-trace" });
    this.knobs = h("div", { class: "mlc-knobs" });
    this.status = h("div", { class: "mlc-trace-status" });
    const fileInput = h("input", { type: "file", accept: ".json,.txt,.py,.trace", class: "mlc-hidden-file" }) as HTMLInputElement;
    fileInput.addEventListener("change", async () => {
      const file = fileInput.files?.[0];
      if (file) this.handlers.importTrace(await file.text(), file.name);
      fileInput.value = "";
    });
    const btn = (label: string, title: string, cls: string, onclick: () => void) => h("button", { class: `mlc-btn ${cls}`, title, onclick }, label);
    const toolbar = h(
      "div",
      { class: "mlc-trace-toolbar" },
      btn("▶ Replay", "Re-run the edited trace from the original program (as a new branch)", "mlc-replay", () => this.handlers.replay(this.text)),
      btn("Revert", "Throw away edits to the trace", "mlc-revert", () => this.setText(this.pristine, true)),
      h("span", { class: "mlc-spacer" }),
      btn("Import…", "Load a trace (JSON or text) and replay it", "mlc-import", () => fileInput.click()),
      btn("JSON", "Download the trace as JSON", "mlc-export-json", () => this.handlers.exportTrace("json")),
      btn("Text", "Download the trace as text", "mlc-export-text", () => this.handlers.exportTrace("text")),
      btn("Copy as Python", "Copy a pasteable schedule function", "mlc-copy-python", () => this.handlers.exportTrace("python")),
      fileInput,
      moreRoomButton(),
    );
    const editorHost = h("div", { class: "mlc-trace-editor" });
    this.decisionsTitle = h("div", { class: "mlc-section-title" }, "Decisions");
    this.el.append(this.decisionsTitle, this.knobs, h("div", { class: "mlc-section-title" }, "Trace"), toolbar, editorHost, this.status);
    this.editor = new EditorView({
      parent: editorHost,
      state: EditorState.create({
        doc: "",
        extensions: [
          lineNumbers(),
          EditorView.lineWrapping, // a narrow pane shows whole calls, not their first 35 characters
          history(),
          keymap.of([...defaultKeymap, ...historyKeymap]),
          cachedPython(),
          ...jpCodeTheme(),
          errorLineField,
          EditorView.updateListener.of((u) => {
            if (u.docChanged) this.el.classList.toggle("mlc-trace-dirty", this.dirty);
          }),
        ],
      }),
    });
    this.onDispose(() => this.editor.destroy());
  }

  get text(): string {
    return this.editor.state.doc.toString();
  }

  get dirty(): boolean {
    return this.text !== this.pristine;
  }

  private pendingTrace: string | null = null;
  private pendingDecisions: Decision[] | null = null;

  /** The panel is hidden behind a tab: keep updates for when it is shown (saves work per step). */
  get hidden(): boolean {
    return this.el.hidden;
  }

  show(): void {
    if (this.pendingDecisions) this.drawDecisions(this.pendingDecisions);
    if (this.pendingTrace !== null) this.applyTrace(this.pendingTrace);
    this.pendingDecisions = null;
    this.pendingTrace = null;
  }

  /** New trace from Python; an edit in progress is kept (the user may still replay it). */
  setTrace(trace: string): void {
    if (this.hidden) {
      this.pendingTrace = trace;
      return;
    }
    this.applyTrace(trace);
  }

  private applyTrace(trace: string): void {
    const wasDirty = this.dirty;
    this.pristine = trace;
    if (!wasDirty) this.setText(trace, false);
    this.el.classList.toggle("mlc-trace-dirty", this.dirty);
  }

  /** After a successful replay or import: show the session's own trace again. */
  resetToSession(): void {
    if (this.pendingTrace !== null) {
      this.pristine = this.pendingTrace;
      this.pendingTrace = null;
    }
    this.setText(this.pristine, true);
  }

  setText(text: string, userAction: boolean): void {
    // A step adds or removes a few instructions: replace only what differs (CodeMirror then redraws
    // those lines, not the whole trace).
    const change = minimalChange(this.text, text);
    if (change) this.editor.dispatch({ changes: change });
    if (userAction) this.showError(null, "");
    this.el.classList.toggle("mlc-trace-dirty", this.dirty);
  }

  showError(line: number | null, message: string): void {
    this.editor.dispatch({ effects: setErrorLine.of(line) });
    this.status.textContent = message ? (line ? `line ${line}: ${message}` : message) : "";
    this.status.classList.toggle("mlc-error-text", !!message);
    if (line && line <= this.editor.state.doc.lines) {
      this.editor.dispatch({ effects: EditorView.scrollIntoView(this.editor.state.doc.line(line).from, { y: "center" }) });
    }
  }

  note(message: string): void {
    this.status.textContent = message;
    this.status.classList.remove("mlc-error-text");
  }

  setDecisions(decisions: Decision[]): void {
    if (this.hidden) this.pendingDecisions = decisions;
    else this.drawDecisions(decisions);
  }

  private drawDecisions(decisions: Decision[]): void {
    // A knob moved with the keyboard redraws every knob: give the focus back to the same control,
    // so that ← → can keep stepping through the values.
    const focused = typeof document !== "undefined" ? document.activeElement : null;
    const knob = focused && this.knobs.contains(focused) ? (focused.closest(".mlc-knob") as HTMLElement | null) : null;
    const refocus = knob ? { index: knob.dataset.index, cls: (focused as HTMLElement).className } : null;
    this.knobs.replaceChildren();
    // No decisions: one line, not a section (in a cell the trace below needs the height).
    this.decisionsTitle.hidden = !decisions.length;
    if (!decisions.length) {
      this.knobs.append(h("div", { class: "mlc-muted mlc-no-decisions", title: "sample_perfect_tile (key t) on a loop adds one" }, "Decisions: none sampled yet (key t on a loop)"));
      return;
    }
    for (const d of decisions) this.knobs.append(this.knob(d));
    if (refocus) this.knobs.querySelector<HTMLElement>(`.mlc-knob[data-index="${refocus.index}"] .${refocus.cls.split(" ")[0]}`)?.focus({ preventScroll: true });
  }

  private knob(d: Decision): HTMLElement {
    const idx = choiceIndex(d);
    const title = `${d.kind === "SamplePerfectTile" ? "tile" : d.kind}${d.loop ? ` of ${d.loop}` : ""}${d.extent ? ` (${d.extent})` : ""}`;
    const valueLabel = h("span", { class: "mlc-knob-value" }, formatChoice(d.value));
    const row = h("div", { class: "mlc-knob", dataset: { index: String(d.index) } }, h("span", { class: "mlc-knob-title" }, `#${d.index} ${title}`), valueLabel);
    const choices = d.choices ?? []; // none for a compute-location decision
    if (!choices.length) return row;
    const select = h("select", { class: "mlc-knob-select", title: "valid values" }) as HTMLSelectElement;
    choices.forEach((c, i) => select.append(h("option", { value: String(i), selected: i === idx }, formatChoice(c))));
    const slider = h("input", { type: "range", class: "mlc-knob-slider", min: "0", max: String(choices.length - 1), step: "1", value: String(Math.max(0, idx)) }) as HTMLInputElement;
    slider.addEventListener("input", () => {
      valueLabel.textContent = formatChoice(choices[Number(slider.value)]);
    });
    const commit = (i: number) => {
      if (i !== idx && i >= 0 && i < choices.length) this.handlers.setDecision(d.index, choices[i]);
    };
    slider.addEventListener("change", () => commit(Number(slider.value)));
    select.addEventListener("change", () => commit(Number(select.value)));
    row.append(slider, select);
    return row;
  }
}
