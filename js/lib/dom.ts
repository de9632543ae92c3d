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
 * Keys pressed inside an mlc_lab view belong to it, not to the notebook around it.
 *
 * JupyterLab (Lumino) matches its command-mode shortcuts against the focused element itself
 * (selector `.jp-Notebook.jp-mod-commandMode :focus:not(:read-write)`), so a
 * `data-lm-suppress-shortcuts` attribute on an ancestor does not shield a focused range slider:
 * its arrow keys were taken (default prevented) before the slider saw them. Lumino listens on the
 * document in the bubbling phase, so stopping the event at the view's root keeps every key here,
 * default actions included. Chords with Ctrl/⌘/Alt that the view does not handle itself still
 * reach JupyterLab (Ctrl+S saves the notebook).
 */
export function keepKeys(root: HTMLElement): void {
  root.setAttribute("data-lm-suppress-shortcuts", "true");
  const stop = (ev: KeyboardEvent) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    ev.stopPropagation();
  };
  root.addEventListener("keydown", stop);
  root.addEventListener("keypress", stop);
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
