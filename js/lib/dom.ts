// A tiny hyperscript helper: the views are small enough not to need a framework.

type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, unknown> & { class?: string; dataset?: Record<string, string> };

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs | null = null,
  ...children: Array<Child | Child[]>
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [key, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "class") el.className = String(value);
      else if (key === "dataset") Object.assign(el.dataset, value as Record<string, string>);
      else if (key === "style" && typeof value === "object") Object.assign(el.style, value);
      else if (key.startsWith("on") && typeof value === "function") {
        el.addEventListener(key.slice(2).toLowerCase(), value as EventListener);
      } else if (value === true) el.setAttribute(key, "");
      else el.setAttribute(key, String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el: HTMLElement, children: Array<Child | Child[]>): void {
  for (const child of children) {
    if (Array.isArray(child)) append(el, child);
    else if (child === null || child === undefined || child === false) continue;
    else el.append(child instanceof Node ? child : String(child));
  }
}

export function clear(el: HTMLElement): void {
  while (el.firstChild) el.removeChild(el.firstChild);
}

/** Offer text as a file download (export of traces and static HTML). */
export function downloadText(filename: string, text: string, mime = "text/plain"): void {
  const url = URL.createObjectURL(new Blob([text], { type: mime }));
  const a = h("a", { href: url, download: filename, style: { display: "none" } });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/**
 * Scroll `container` (only it, never the page or the notebook) so that `el` is visible. Runs in the
 * next animation frame, when the browser lays out anyway, so it forces no extra layout.
 */
export function revealInContainer(container: HTMLElement, el: HTMLElement | null): void {
  if (!el) return;
  const run = () => {
    if (!el.isConnected) return;
    const top = el.offsetTop - container.offsetTop;
    const bottom = top + el.offsetHeight;
    if (top < container.scrollTop) container.scrollTop = top;
    else if (bottom > container.scrollTop + container.clientHeight) container.scrollTop = bottom - container.clientHeight;
  };
  if (typeof requestAnimationFrame === "function") requestAnimationFrame(run);
  else run();
}

/** Buttons that must not take focus from their widget when clicked (keyboard focus stays put). */
export function keepFocus(ev: Event): void {
  ev.preventDefault();
}

/**
 * Keys pressed inside an mlc_lab view belong to it, not to the notebook around it; chords belong to
 * JupyterLab.
 *
 * JupyterLab (Lumino) listens on the document in the bubbling phase and matches its command-mode
 * shortcuts against the focused element itself (`.jp-Notebook.jp-mod-commandMode :focus:not(:read-write)`):
 * a plain key (an arrow on a range slider, `s` for split) that reached it would move or cut a cell.
 * So a plain key stops at the view's root, default actions included. A chord (Ctrl/⌘/Alt) that the view
 * does not handle itself goes on to JupyterLab, which runs its command and prevents the browser's
 * default: Ctrl/⌘+S saves the notebook (never the browser's "Save page as"), Ctrl/⌘+Enter runs the
 * cell, Ctrl+Shift+C opens the palette. No `data-lm-suppress-shortcuts` on the view: Lumino skips every
 * shortcut under that attribute, Ctrl+S included. Inside a text field or a code view of the view, the
 * editing chords (select all, copy, cut, paste, undo, delete line, comment) stay with it: JupyterLab's
 * versions of those would act on the notebook's cells instead.
 */
export function keepKeys(root: HTMLElement): void {
  const stop = (ev: KeyboardEvent) => {
    if (!isChord(ev) || keepsChord(ev)) {
      ev.stopPropagation();
      return;
    }
    if (ev.type === "keydown" && isSave(ev)) saveNotBrowser(root, ev);
  };
  root.addEventListener("keydown", stop);
  root.addEventListener("keypress", stop);
}

const isChord = (ev: KeyboardEvent) => ev.ctrlKey || ev.metaKey || ev.altKey;
const isSave = (ev: KeyboardEvent) => (ev.ctrlKey || ev.metaKey) && !ev.altKey && (ev.key === "s" || ev.key === "S");
// The chords a text field or an editor answers itself (with Ctrl or ⌘; Alt+A toggles a block comment).
const EDITING_KEYS = new Set(["a", "c", "v", "x", "z", "y", "d", "k", "/", "Backspace", "Delete", "ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "Home", "End"]);

/** A chord that a text field or a code editor of the view answers, pressed there. */
function keepsChord(ev: KeyboardEvent): boolean {
  const el = ev.target as HTMLElement | null;
  if (!el || typeof el.closest !== "function") return false;
  const tag = el.tagName;
  const editing = tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || el.isContentEditable || !!el.closest(".cm-editor");
  if (!editing) return false;
  const key = ev.key.length === 1 ? ev.key.toLowerCase() : ev.key;
  return EDITING_KEYS.has(key) && !(ev.altKey && key !== "a");
}

/** Ctrl/⌘+S from the view: JupyterLab's save prevents the browser's own "Save page as"; where the page
 * is JupyterLab's and nothing did (a save command not bound there), prevent it here, after JupyterLab
 * had its turn (a window listener runs after the document's). */
function saveNotBrowser(root: HTMLElement, ev: KeyboardEvent): void {
  const win = root.ownerDocument?.defaultView;
  if (!win || !root.closest(".lm-Widget")) return;
  const after = (late: KeyboardEvent) => {
    win.removeEventListener("keydown", after);
    if (late === ev && !late.defaultPrevented) late.preventDefault();
  };
  win.addEventListener("keydown", after);
  setTimeout(() => win.removeEventListener("keydown", after), 0);
}

/** "⤢ more room": in a crowded view of a widget inside a cell, the way to its full-window view. The
 * widget's root answers the click (a click on `.mlc-more-room` inside it); hidden once maximized. */
export function moreRoomButton(): HTMLButtonElement {
  return h("button", {
    type: "button",
    class: "mlc-btn mlc-more-room",
    title: "Open the explorer over the whole page (Esc to come back): this view gets the room it needs",
    onmousedown: keepFocus,
  }, "⤢ more room") as HTMLButtonElement;
}
