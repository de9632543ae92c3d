// Keyboard shortcuts of the explorer, loop_tool style: arrows walk the loop tree, single letters
// open the form of a frequent primitive, ctrl/cmd+z undoes. A pure mapping from a key event, and
// the help card that lists the shortcuts.

import { h } from "../lib/dom";

export type KeyAction =
  | { type: "undo" }
  | { type: "redo" }
  | { type: "move"; delta: 1 | -1 }
  | { type: "parent" }
  | { type: "child" }
  | { type: "primitive"; key: string }
  | { type: "escape" }
  | { type: "help" }
  | { type: "measure" };

export interface KeyLike {
  key: string;
  ctrlKey?: boolean;
  metaKey?: boolean;
  shiftKey?: boolean;
  altKey?: boolean;
}

export const PRIMITIVE_KEYS = new Set(["s", "r", "f", "p", "v", "u", "b", "c", "d", "i", "t"]);

export function keyAction(e: KeyLike): KeyAction | null {
  const mod = !!(e.ctrlKey || e.metaKey);
  const key = e.key.length === 1 ? e.key.toLowerCase() : e.key;
  if (mod && !e.altKey) {
    if (key === "z") return e.shiftKey ? { type: "redo" } : { type: "undo" };
    if (key === "y" && !e.shiftKey) return { type: "redo" };
    return null;
  }
  if (e.altKey || mod) return null;
  switch (key) {
    case "ArrowDown":
      return { type: "move", delta: 1 };
    case "ArrowUp":
      return { type: "move", delta: -1 };
    case "ArrowLeft":
      return { type: "parent" };
    case "ArrowRight":
      return { type: "child" };
    case "Escape":
      return { type: "escape" };
    case "?":
      return { type: "help" };
  }
  if (!e.shiftKey && PRIMITIVE_KEYS.has(key)) return { type: "primitive", key };
  if (!e.shiftKey && key === "m") return { type: "measure" };
  return null;
}

/** Keys typed into form fields or editors belong to them, except undo/redo chords there are theirs too. */
export function isEditableTarget(target: EventTarget | null): boolean {
  const el = target as HTMLElement | null;
  if (!el || typeof el.closest !== "function") return false;
  if (el.closest(".cm-editor")) return !el.closest(".mlc-code .cm-editor"); // the code view is read-only
  const tag = el.tagName;
  return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || el.isContentEditable;
}

export const SHORTCUT_HELP: Array<[string, string]> = [
  ["↑ ↓", "previous / next loop or block"],
  ["← →", "parent / first child"],
  ["s", "split"],
  ["r", "reorder"],
  ["f", "fuse"],
  ["p v u", "parallel / vectorize / unroll"],
  ["b", "bind"],
  ["c", "compute_at / reverse_compute_at"],
  ["d", "decompose_reduction"],
  ["i", "compute_inline"],
  ["t", "sample_perfect_tile"],
  ["m", "measure the current step (latency in the history)"],
  ["Ctrl/⌘+Z", "undo"],
  ["Ctrl/⌘+Shift+Z, Ctrl+Y", "redo"],
  ["Esc", "close the form / clear the error"],
];

/** Show the shortcuts over the explorer at `root`, or hide them when shown (a click hides them too). */
export function toggleHelp(root: HTMLElement): void {
  const existing = root.querySelector(".mlc-help");
  if (existing) {
    existing.remove();
    return;
  }
  const table = h("table", {}, ...SHORTCUT_HELP.map(([k, v]) => h("tr", {}, h("td", {}, h("kbd", {}, k)), h("td", {}, v))));
  root.append(h("div", { class: "mlc-help", onclick: () => toggleHelp(root) }, h("div", { class: "mlc-help-card" }, h("b", {}, "Keyboard shortcuts (click the explorer first)"), table)));
}
