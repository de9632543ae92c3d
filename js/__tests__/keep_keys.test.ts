// @vitest-environment jsdom
// Keys inside an mlc_lab view (lib/dom.ts keepKeys): plain keys stay in the view, chords go on to
// JupyterLab (Ctrl/⌘+S saves the notebook), editing chords stay in the view's text fields and editors,
// and a Ctrl+S nobody handled does not open the browser's "Save page as" inside JupyterLab.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { keepKeys } from "../lib/dom";

let root: HTMLElement;
let shell: HTMLElement;
let seen: string[];
const record = (ev: KeyboardEvent) => seen.push(`${ev.ctrlKey ? "Ctrl+" : ""}${ev.metaKey ? "Meta+" : ""}${ev.altKey ? "Alt+" : ""}${ev.key}`);

function press(target: Element, key: string, extra: KeyboardEventInit = {}): KeyboardEvent {
  const ev = new KeyboardEvent("keydown", { key, bubbles: true, cancelable: true, ...extra });
  target.dispatchEvent(ev);
  return ev;
}

beforeEach(() => {
  seen = [];
  shell = document.createElement("div");
  shell.className = "lm-Widget jp-Notebook";
  root = document.createElement("div");
  root.innerHTML = '<button class="b">x</button><input class="i"><div class="cm-editor"><div class="cm-content" tabindex="0">code</div></div>';
  shell.append(root);
  document.body.append(shell);
  keepKeys(root);
  document.addEventListener("keydown", record);
});
afterEach(() => {
  document.removeEventListener("keydown", record);
  shell.remove();
});

describe("keepKeys", () => {
  it("leaves no attribute that makes Lumino skip every shortcut", () => {
    expect(root.hasAttribute("data-lm-suppress-shortcuts")).toBe(false);
  });

  it("keeps plain keys in the view and lets every chord through to JupyterLab", () => {
    const button = root.querySelector(".b")!;
    for (const key of ["ArrowDown", "s", "Enter", "Escape"]) press(button, key);
    press(button, "s", { ctrlKey: true });
    press(button, "s", { metaKey: true });
    press(button, "Enter", { ctrlKey: true });
    press(button, "C", { ctrlKey: true, shiftKey: true });
    press(button, "a", { ctrlKey: true });
    expect(seen).toEqual(["Ctrl+s", "Meta+s", "Ctrl+Enter", "Ctrl+C", "Ctrl+a"]);
  });

  it("keeps the editing chords in its text fields and code views, and lets Ctrl+S through from there", () => {
    for (const sel of [".i", ".cm-content"]) {
      const el = root.querySelector(sel)!;
      for (const key of ["a", "c", "v", "x", "z", "d", "/"]) press(el, key, { ctrlKey: true });
      press(el, "a", { altKey: true });
      press(el, "s", { ctrlKey: true });
      press(el, "Enter", { ctrlKey: true });
    }
    expect(seen).toEqual(["Ctrl+s", "Ctrl+Enter", "Ctrl+s", "Ctrl+Enter"]);
  });

  it("never lets Ctrl+S open the browser's save dialog in JupyterLab, and does not pre-empt JupyterLab's save", () => {
    let preventedBeforeLab: boolean | null = null;
    const lab = (ev: KeyboardEvent) => {
      preventedBeforeLab = ev.defaultPrevented; // Lumino bails out on an event already prevented
    };
    document.addEventListener("keydown", lab);
    const ev = press(root.querySelector(".b")!, "s", { ctrlKey: true });
    document.removeEventListener("keydown", lab);
    expect(preventedBeforeLab).toBe(false);
    expect(ev.defaultPrevented).toBe(true);
    // outside JupyterLab (a static page, marimo) the view leaves the chord to the page
    shell.classList.remove("lm-Widget");
    expect(press(root.querySelector(".b")!, "s", { ctrlKey: true }).defaultPrevented).toBe(false);
  });
});
