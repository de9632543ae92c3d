// Where mlc_lab's CSS goes: into the root that holds each widget. In JupyterLab, Notebook 7 and an
// exported page that root is the document (a <style> in its head, as before); marimo and MyST's
// anywidget directive render every widget inside its own shadow root, which rules in document.head
// never reach, so there the styles are adopted by the shadow root itself.
//
// A view calls `ensureStyle(id, css)` (lib/theme.ts) whenever it needs a stylesheet, without knowing
// where it is shown; the front end's entry (mlc_lab.ts) calls `mountStyles(el)` around every widget's
// render, which finds the widget's root (once the host has attached `el`) and gives it every
// stylesheet registered so far and every one registered later. Code that draws outside such a
// render (the labextension's tuning-run document) has no mounted root: its styles go to the document.

export type StyleRoot = Document | ShadowRoot;

/** Called once for each shadow root that starts holding mlc_lab widgets; returns its undo. */
export type ShadowRootHook = (root: ShadowRoot) => () => void;

const registered = new Map<string, string>(); // id -> css, in registration order
const roots = new Map<StyleRoot, { widgets: number; undo: Array<() => void> }>();
const hooks: ShadowRootHook[] = [];
let pending = 0; // widgets whose element the host has not attached yet
const sheets = new WeakMap<Document, Map<string, CSSStyleSheet>>(); // constructed sheets, shared by a page's shadow roots

/** The document or shadow root `node` lives in; null while it is not attached to either. */
export function styleRootOf(node: Node): StyleRoot | null {
  const root = node.getRootNode?.();
  if (!root) return null;
  if (root.nodeType === 9) return root as Document;
  if (root.nodeType === 11 && (root as ShadowRoot).host) return root as ShadowRoot;
  return null;
}

function canAdopt(root: ShadowRoot): boolean {
  const win = root.ownerDocument.defaultView as (Window & typeof globalThis) | null;
  return !!win && "adoptedStyleSheets" in root && typeof win.CSSStyleSheet?.prototype?.replaceSync === "function";
}

function installInDocument(doc: Document, id: string, css: string): void {
  const existing = doc.getElementById(id);
  if (existing) {
    if (existing.textContent !== css) existing.textContent = css; // hot reload
    return;
  }
  const style = doc.createElement("style");
  style.id = id;
  style.textContent = css;
  doc.head.appendChild(style);
}

function installInShadow(root: ShadowRoot, id: string, css: string): void {
  const doc = root.ownerDocument;
  if (canAdopt(root)) {
    let byId = sheets.get(doc);
    if (!byId) sheets.set(doc, (byId = new Map()));
    let sheet = byId.get(id);
    if (!sheet) {
      const win = doc.defaultView as Window & typeof globalThis;
      sheet = new win.CSSStyleSheet();
      sheet.replaceSync(css);
      (sheet as unknown as { mlcText: string }).mlcText = css;
      byId.set(id, sheet);
    } else if ((sheet as unknown as { mlcText: string }).mlcText !== css) {
      sheet.replaceSync(css); // hot reload: every root that adopted it follows
      (sheet as unknown as { mlcText: string }).mlcText = css;
    }
    if (!root.adoptedStyleSheets.includes(sheet)) root.adoptedStyleSheets = [...root.adoptedStyleSheets, sheet];
    return;
  }
  // No constructable stylesheets (an old browser, jsdom): a <style> at the top of the shadow root.
  const existing = root.getElementById(id);
  if (existing) {
    if (existing.textContent !== css) existing.textContent = css;
    return;
  }
  const style = doc.createElement("style");
  style.id = id;
  style.textContent = css;
  const last = [...root.children].filter((c) => c.tagName === "STYLE" && c.id.startsWith("mlc-lab-")).pop();
  if (last) last.after(style);
  else root.prepend(style);
}

function install(root: StyleRoot, id: string, css: string): void {
  if (root.nodeType === 9) installInDocument(root as Document, id, css);
  else installInShadow(root as ShadowRoot, id, css);
}

/** Register a stylesheet (once per id; a changed text replaces it) and install it in every root that
 * holds mlc_lab widgets; with no such root known, in `doc` (the old behaviour, for code that draws
 * outside a mounted widget). */
export function registerStyle(id: string, css: string, doc: Document = document): void {
  registered.set(id, css);
  if (roots.size === 0 && pending === 0) {
    installInDocument(doc, id, css);
    return;
  }
  for (const root of roots.keys()) install(root, id, css);
}

function addRoot(root: StyleRoot): () => void {
  let entry = roots.get(root);
  if (!entry) {
    entry = { widgets: 0, undo: [] };
    roots.set(root, entry);
    for (const [id, css] of registered) install(root, id, css);
    if (root.nodeType === 11) for (const hook of hooks) entry.undo.push(hook(root as ShadowRoot));
  }
  entry.widgets += 1;
  let done = false;
  return () => {
    if (done) return;
    done = true;
    const e = roots.get(root);
    if (!e) return;
    e.widgets -= 1;
    if (e.widgets > 0) return;
    roots.delete(root);
    for (const undo of e.undo) undo(); // the stylesheets stay: the root may show a widget again
  };
}

const nextFrame = (fn: () => void) =>
  typeof requestAnimationFrame === "function" ? requestAnimationFrame(fn) : setTimeout(fn, 16);

/**
 * Give the root holding `el` every mlc_lab stylesheet, now and as more are registered. A host may
 * render into an element it attaches afterwards (JupyterLab's output area): then the root is found
 * on a later animation frame. Returns the undo, called when the widget's view is disposed.
 */
export function mountStyles(el: HTMLElement): () => void {
  const root = styleRootOf(el);
  if (root) return addRoot(root);
  pending += 1;
  let undo: (() => void) | null = null;
  let waiting = true;
  let frames = 0;
  const stopWaiting = () => {
    if (waiting) {
      waiting = false;
      pending -= 1;
    }
  };
  const check = () => {
    if (!waiting) return;
    const found = styleRootOf(el);
    if (found) {
      stopWaiting();
      undo = addRoot(found);
    } else if (++frames < 36_000) nextFrame(check); // a background tab runs no frames: this costs nothing there
    else stopWaiting();
  };
  nextFrame(check);
  return () => {
    stopWaiting();
    undo?.();
  };
}

/** Run `hook` for every shadow root that holds mlc_lab widgets, now and later (CodeMirror's own
 * stylesheets follow the editors into such roots this way: lib/cm_theme.ts). */
export function onShadowRoot(hook: ShadowRootHook): void {
  hooks.push(hook);
  for (const [root, entry] of roots) if (root.nodeType === 11) entry.undo.push(hook(root as ShadowRoot));
}

/** Every stylesheet text a root carries (its <style> elements and adopted sheets), for tests. */
export function cssOfRoot(root: StyleRoot): string {
  const parts: string[] = [];
  const styles = root.nodeType === 9 ? (root as Document).head.querySelectorAll("style") : root.querySelectorAll("style");
  for (const s of styles) parts.push(s.textContent ?? "");
  for (const sheet of (root as ShadowRoot).adoptedStyleSheets ?? []) {
    const text = (sheet as unknown as { mlcText?: string }).mlcText;
    parts.push(text ?? [...sheet.cssRules].map((r) => r.cssText).join("\n"));
  }
  return parts.join("\n");
}
