// The code panel: TVMScript in a read-only CodeMirror 6 view, with the lines the last step changed,
// the selected loop/block and the loops an error involves marked; or a diff (unified or side by
// side, @codemirror/merge) against an earlier step.

import { MergeView, unifiedMergeView } from "@codemirror/merge";
import { EditorSelection, EditorState, type Extension, RangeSetBuilder, StateEffect, StateField } from "@codemirror/state";
import { Decoration, type DecorationSet, EditorView, GutterMarker, gutter, lineNumbers } from "@codemirror/view";
import { h } from "../lib/dom";
import { cachedPython } from "../lib/cached_python";
import { jpCodeTheme } from "../lib/cm_theme";
import { indentInsensitiveDiff } from "./line_diff";

// Lines that only moved one nest in or out are not changes (see line_diff.ts).
const DIFF_CONFIG = { override: indentInsensitiveDiff };

export interface Marks {
  changed: number[]; // 1-based lines
  selected: [number, number] | null;
  involved: Array<[number, number]>;
  hover?: [number, number] | null; // a tree row under the mouse
}

const emptyMarks: Marks = { changed: [], selected: null, involved: [] };
const setMarks = StateEffect.define<Marks>();

const marksField = StateField.define<Marks>({
  create: () => emptyMarks,
  update(value, tr) {
    for (const e of tr.effects) if (e.is(setMarks)) return e.value;
    return value;
  },
});

const changedLine = Decoration.line({ class: "mlc-line-changed" });
const selectedLine = Decoration.line({ class: "mlc-line-selected" });
const selectedFirst = Decoration.line({ class: "mlc-line-selected mlc-line-selected-head" });
const involvedLine = Decoration.line({ class: "mlc-line-involved" });
const hoverLine = Decoration.line({ class: "mlc-line-hover" });

/** Decorations for the marks; classes combine when a line has several marks. */
export function lineClasses(marks: Marks, lineCount: number): Map<number, string[]> {
  const out = new Map<number, string[]>();
  const add = (line: number, cls: string) => {
    if (line < 1 || line > lineCount) return;
    const list = out.get(line) ?? [];
    if (!list.includes(cls)) list.push(cls);
    out.set(line, list);
  };
  for (const l of marks.changed) add(l, "changed");
  if (marks.selected) for (let l = marks.selected[0]; l <= marks.selected[1]; l++) add(l, l === marks.selected[0] ? "selected-head" : "selected");
  for (const [a, b] of marks.involved) for (let l = a; l <= b; l++) add(l, "involved");
  if (marks.hover) for (let l = marks.hover[0]; l <= marks.hover[1]; l++) add(l, "hover");
  return out;
}

const decorations = EditorView.decorations.compute([marksField, "doc"], (state) => {
  const marks = state.field(marksField);
  const builder = new RangeSetBuilder<Decoration>();
  const classes = lineClasses(marks, state.doc.lines);
  for (const line of [...classes.keys()].sort((a, b) => a - b)) {
    const from = state.doc.line(line).from;
    for (const cls of classes.get(line)!) {
      const deco =
        cls === "changed" ? changedLine : cls === "selected-head" ? selectedFirst : cls === "selected" ? selectedLine : cls === "hover" ? hoverLine : involvedLine;
      builder.add(from, from, deco);
    }
  }
  return builder.finish() as DecorationSet;
});

class ChangedMarker extends GutterMarker {
  override toDOM() {
    return h("span", { class: "mlc-gutter-changed", title: "changed by the last step" }, "●");
  }
}
const changedMarker = new ChangedMarker();

const changeGutter = gutter({
  class: "mlc-change-gutter",
  markers(view) {
    const builder = new RangeSetBuilder<GutterMarker>();
    const { changed } = view.state.field(marksField);
    for (const l of [...changed].sort((a, b) => a - b)) {
      if (l >= 1 && l <= view.state.doc.lines) {
        const from = view.state.doc.line(l).from;
        builder.add(from, from, changedMarker);
      }
    }
    return builder.finish();
  },
});

// One parser for every script pane and diff: a step back or forth shows a script already parsed.
const scriptPython = cachedPython();

function readOnlyCode(): Extension[] {
  return [EditorState.readOnly.of(true), EditorView.editable.of(false), scriptPython, ...jpCodeTheme()];
}

export type DiffMode = "off" | "unified" | "split";

/** Smallest single replacement turning `a` into `b` (keeps the scroll position stable). */
export function minimalChange(a: string, b: string): { from: number; to: number; insert: string } | null {
  if (a === b) return null;
  let start = 0;
  const max = Math.min(a.length, b.length);
  while (start < max && a.charCodeAt(start) === b.charCodeAt(start)) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a.charCodeAt(endA - 1) === b.charCodeAt(endB - 1)) {
    endA--;
    endB--;
  }
  return { from: start, to: endA, insert: b.slice(start, endB) };
}

export class CodeView {
  readonly el: HTMLElement;
  private view: EditorView;
  private diffHost: HTMLElement;
  private diff: { destroy(): void } | null = null;
  private marks: Marks = emptyMarks;

  constructor(
    parent: HTMLElement,
    private onLineClick: (line: number) => void,
  ) {
    this.el = h("div", { class: "mlc-code" });
    const main = h("div", { class: "mlc-code-main" });
    this.diffHost = h("div", { class: "mlc-code-diff", hidden: true });
    this.el.append(main, this.diffHost);
    parent.append(this.el);
    this.view = new EditorView({
      parent: main,
      state: EditorState.create({
        doc: "",
        extensions: [
          lineNumbers(),
          changeGutter,
          marksField,
          decorations,
          ...readOnlyCode(),
          EditorView.domEventHandlers({
            mousedown: (event, view) => {
              const pos = view.posAtCoords({ x: event.clientX, y: event.clientY });
              if (pos !== null) this.onLineClick(view.state.doc.lineAt(pos).number);
              return false;
            },
          }),
        ],
      }),
    });
  }

  get text(): string {
    return this.view.state.doc.toString();
  }

  /** Replace the script and the marks in one transaction. `scrollTo` (1-based: a line, or the first
   *  and last lines of a span) is scrolled into view when it is not in view: the whole span where it
   *  fits, else from its first line. */
  update(script: string, marks: Marks, scrollTo?: number | [number, number] | null): void {
    this.marks = marks;
    const change = minimalChange(this.text, script);
    const effects: StateEffect<unknown>[] = [setMarks.of(marks)];
    const span = typeof scrollTo === "number" ? [scrollTo, scrollTo] : (scrollTo ?? null);
    if (span && span[0] >= 1) {
      const from = posOfLine(script, span[0]);
      const next = posOfLine(script, Math.max(span[0], span[1]) + 1);
      const to = next > from && script[next - 1] === "\n" ? next - 1 : next; // the end of the last line
      const before = (pos: number) => (change ? mapPos(pos, change) : pos);
      // Scroll only when off screen: a scroll request makes CodeMirror measure now.
      if (!this.isVisible(before(from)) || !this.isVisible(before(to)))
        effects.push(EditorView.scrollIntoView(EditorSelection.range(to, from), { y: "nearest", yMargin: 40 }));
    }
    this.view.dispatch({ changes: change ?? undefined, effects });
  }

  /** Is the line at `pos` (in the current document) wholly inside the code panel's scroller? Not
   *  CodeMirror's `visibleRanges`: they hold the lines it renders past the scroller's edges (its
   *  margin, some hundred pixels), so a line far below the fold counted as seen and nothing scrolled. */
  private isVisible(pos: number): boolean {
    const scroller = this.view.scrollDOM;
    const height = scroller.clientHeight;
    if (!height || !this.view.dom.isConnected) return true; // hidden: nothing to scroll
    const line = this.view.lineBlockAt(Math.min(pos, this.view.state.doc.length));
    const top = this.view.documentTop + line.top - scroller.getBoundingClientRect().top - scroller.clientTop;
    return top >= 0 && top + line.height <= height;
  }

  setMarks(marks: Marks, scrollTo?: number | [number, number] | null): void {
    this.update(this.text, marks, scrollTo);
  }

  get currentMarks(): Marks {
    return this.marks;
  }

  /** Show a diff of `original` (an earlier step) against `current`, or go back to the plain view. */
  showDiff(mode: DiffMode, original: string, current: string): void {
    this.diff?.destroy();
    this.diff = null;
    this.diffHost.replaceChildren();
    const plain = this.el.querySelector<HTMLElement>(".mlc-code-main")!;
    if (mode === "off") {
      this.diffHost.hidden = true;
      plain.hidden = false;
      return;
    }
    plain.hidden = true;
    this.diffHost.hidden = false;
    if (mode === "unified") {
      const view = new EditorView({
        parent: this.diffHost,
        state: EditorState.create({
          doc: current,
          extensions: [
            lineNumbers(),
            ...readOnlyCode(),
            unifiedMergeView({ original, mergeControls: false, highlightChanges: true, gutter: true, syntaxHighlightDeletions: true, diffConfig: DIFF_CONFIG }),
          ],
        }),
      });
      this.diff = view;
    } else {
      const merge = new MergeView({
        parent: this.diffHost,
        a: { doc: original, extensions: [lineNumbers(), ...readOnlyCode()] },
        b: { doc: current, extensions: [lineNumbers(), ...readOnlyCode()] },
        highlightChanges: true,
        gutter: true,
        diffConfig: DIFF_CONFIG,
      });
      this.diff = merge;
    }
  }

  dispose(): void {
    this.diff?.destroy();
    this.view.destroy();
  }
}

function posOfLine(text: string, line: number): number {
  let pos = 0;
  for (let l = 1; l < line; l++) {
    const nl = text.indexOf("\n", pos);
    if (nl < 0) return text.length;
    pos = nl + 1;
  }
  return pos;
}

/** Map a position of the new text back into the old one (to test visibility before the change). */
function mapPos(posInNew: number, change: { from: number; to: number; insert: string }): number {
  if (posInNew <= change.from) return posInNew;
  const delta = change.insert.length - (change.to - change.from);
  return Math.max(change.from, posInNew - delta);
}
