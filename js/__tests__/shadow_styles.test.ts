// @vitest-environment jsdom
// Hosts that render each widget in a shadow root (marimo, MyST's anywidget directive): mlc_lab's
// stylesheets and CodeMirror's must land in that root, where its rules apply, not in document.head.
import { EditorView } from "@codemirror/view";
import { afterEach, describe, expect, it } from "vitest";
import { cssOfRoot } from "../lib/styles";
import { ensureStyle } from "../lib/theme";
import { widgets } from "../mlc_lab";
import { fakeModel, tick } from "./fixtures";

const cleanups: Array<() => void> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

function shadowHost(): ShadowRoot {
  const host = document.createElement("div");
  document.body.append(host);
  cleanups.push(() => host.remove());
  return host.attachShadow({ mode: "open" });
}

async function renderExplorer(el: HTMLElement): Promise<void> {
  const cleanup = await widgets.explorer.render({ model: fakeModel() as any, el, signal: new AbortController().signal } as any);
  if (typeof cleanup === "function") cleanups.push(cleanup as () => void);
  await tick();
}

// vitest imports .css files as "" (no CSS processing): the sheets are told apart by their ids here,
// and by their text where a test registers one itself.
const ids = (root: Document | ShadowRoot) =>
  [...(root.nodeType === 9 ? (root as Document).head : root).querySelectorAll("style")].map((s) => s.id).filter((id) => id.startsWith("mlc-lab-"));
const frames = () => new Promise((resolve) => setTimeout(resolve, 60));
const headCss = () => cssOfRoot(document);

describe("styles follow the widget into its shadow root", () => {
  it("an explorer mounted in a shadow root gets its CSS and CodeMirror's there, and none in document.head", async () => {
    const root = shadowHost();
    const el = document.createElement("div");
    root.append(el);
    await renderExplorer(el);

    expect(ids(root)).toEqual(expect.arrayContaining(["mlc-lab-explorer-style", "mlc-lab-classroom-style", "mlc-lab-access-style"]));
    const css = cssOfRoot(root);
    // CodeMirror's own modules: its layout (.cm-content) and the syntax colours of lib/cm_theme.ts
    expect(css).toContain(".cm-content");
    expect(css).toContain("--jp-mirror-editor-keyword-color");
    const editor = root.querySelector(".mlc-code-main .cm-editor") as HTMLElement;
    expect(editor).not.toBeNull();
    expect(EditorView.findFromDOM(editor)?.root).toBe(root);

    // (CodeMirror may also have put its sheet in the document, where the editor was made before the
    // explorer was attached: harmless, its class names are its own.)
    expect(ids(document)).toEqual([]);
  });

  it("a widget rendered into a detached element gets its styles once the host puts it in a shadow root", async () => {
    const root = shadowHost();
    const el = document.createElement("div");
    await renderExplorer(el); // not attached yet (JupyterLab renders before it attaches, too)
    root.append(el);
    await frames();
    expect(ids(root)).toContain("mlc-lab-explorer-style");
    expect(cssOfRoot(root)).toContain("--jp-mirror-editor-keyword-color");
    const editor = root.querySelector(".mlc-code-main .cm-editor") as HTMLElement;
    expect(EditorView.findFromDOM(editor)?.root).toBe(root);
    expect(document.getElementById("mlc-lab-explorer-style")).toBeNull();
  });

  it("a stylesheet registered later (a panel opened afterwards) and a changed one reach every mounted root", async () => {
    const a = shadowHost();
    const b = shadowHost();
    for (const root of [a, b]) {
      const el = document.createElement("div");
      root.append(el);
      await renderExplorer(el);
    }
    ensureStyle("mlc-lab-test-late-style", ".mlc-late { color: red }");
    for (const root of [a, b]) expect(cssOfRoot(root)).toContain(".mlc-late { color: red }");
    ensureStyle("mlc-lab-test-late-style", ".mlc-late { color: blue }");
    for (const root of [a, b]) {
      expect(cssOfRoot(root)).toContain(".mlc-late { color: blue }");
      expect(cssOfRoot(root)).not.toContain(".mlc-late { color: red }");
    }
    expect(document.getElementById("mlc-lab-test-late-style")).toBeNull();
  });

  it("a widget in the document still gets its stylesheets in document.head", async () => {
    const el = document.createElement("div");
    document.body.append(el);
    cleanups.push(() => el.remove());
    await renderExplorer(el);
    await frames();
    expect(ids(document)).toEqual(expect.arrayContaining(["mlc-lab-explorer-style", "mlc-lab-test-late-style"]));
    expect(headCss()).toContain("--jp-mirror-editor-keyword-color");
  });
});
