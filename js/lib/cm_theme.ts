// CodeMirror 6 theme and syntax colours from JupyterLab's editor variables (see ./theme.ts).

import { HighlightStyle, syntaxHighlighting } from "@codemirror/language";
import type { Extension } from "@codemirror/state";
import { EditorView } from "@codemirror/view";
import { tags as t } from "@lezer/highlight";
import { onShadowRoot } from "./styles";
import { jp } from "./theme";

const mirror = (name: string, fallback: string) => jp(`mirror-editor-${name}-color`, fallback);

/** Syntax colours: the same variables JupyterLab's own editors use. */
export const jpHighlightStyle = HighlightStyle.define([
  { tag: t.keyword, color: mirror("keyword", "#008000"), fontWeight: "bold" },
  { tag: [t.controlKeyword, t.moduleKeyword], color: mirror("keyword", "#008000"), fontWeight: "bold" },
  { tag: [t.definition(t.variableName), t.function(t.definition(t.variableName))], color: mirror("def", "#0000ff") },
  { tag: [t.className, t.definition(t.className)], color: mirror("def", "#0000ff") },
  { tag: t.variableName, color: mirror("variable", "#212121") },
  { tag: [t.propertyName, t.attributeName], color: mirror("property", "#05a") },
  { tag: [t.number, t.bool, t.null, t.atom], color: mirror("number", "#080") },
  { tag: [t.string, t.special(t.string)], color: mirror("string", "#ba2121") },
  { tag: [t.comment, t.lineComment], color: mirror("comment", "#408080"), fontStyle: "italic" },
  { tag: [t.operator, t.compareOperator, t.arithmeticOperator], color: mirror("operator", "#aa22ff"), fontWeight: "bold" },
  { tag: [t.punctuation, t.separator], color: mirror("punctuation", "#0055aa") },
  { tag: [t.bracket, t.paren, t.squareBracket], color: mirror("bracket", "#997") },
  { tag: t.meta, color: mirror("meta", "#aa22ff") },
  { tag: [t.self, t.standard(t.variableName)], color: mirror("builtin", "#008000") },
  { tag: t.invalid, color: mirror("error", "#f00") },
]);

/** Editor chrome (background, gutters, cursor, selection) from Lab's layout/editor variables. */
export function jpEditorTheme(): Extension {
  return EditorView.theme({
    "&": {
      color: jp("content-font-color1", "rgba(0,0,0,.87)"),
      backgroundColor: jp("cell-editor-background", "#f7f7f7"),
      fontSize: jp("code-font-size", "13px"),
      height: "100%",
    },
    ".cm-content": {
      fontFamily: jp("code-font-family", "Menlo, Consolas, 'DejaVu Sans Mono', monospace"),
      caretColor: jp("editor-cursor-color", "#000"),
    },
    ".cm-scroller": {
      fontFamily: jp("code-font-family", "Menlo, Consolas, 'DejaVu Sans Mono', monospace"),
      lineHeight: jp("code-line-height", "1.4"),
      overflow: "auto",
    },
    ".cm-gutters": {
      backgroundColor: jp("layout-color2", "#eee"),
      color: jp("ui-font-color2", "#888"),
      borderRight: `1px solid ${jp("border-color2", "#e0e0e0")}`,
    },
    "&.cm-focused .cm-selectionBackground, .cm-selectionBackground, ::selection": {
      backgroundColor: jp("editor-selected-background", "#d9d9d9"),
    },
    ".cm-activeLine": { backgroundColor: "transparent" },
    ".cm-activeLineGutter": { backgroundColor: "transparent" },
  });
}

export function jpCodeTheme(): Extension[] {
  return [jpEditorTheme(), syntaxHighlighting(jpHighlightStyle)];
}


/** CodeMirror mounts its stylesheets (base theme, the themes above, syntax colours) in the root it
 * was made in, and an editor made before its widget is attached takes the document. In a shadow
 * root (marimo, MyST) every editor under it is moved to that root (`EditorView.setRoot`), the ones
 * made later too, so that its line layout and highlighting colours reach it. */
export function adoptEditors(root: ShadowRoot): () => void {
  const adopt = (dom: Element) => {
    const view = EditorView.findFromDOM(dom as HTMLElement);
    if (view && view.root !== root) view.setRoot(root);
  };
  for (const dom of root.querySelectorAll(".cm-editor")) adopt(dom);
  const observer = new MutationObserver((records) => {
    for (const record of records) {
      for (const node of record.addedNodes) {
        if (node.nodeType !== 1) continue;
        const el = node as Element;
        if (el.classList.contains("cm-editor")) adopt(el);
        else if (!el.closest(".cm-editor")) for (const dom of el.querySelectorAll(".cm-editor")) adopt(dom);
      }
    }
  });
  observer.observe(root, { childList: true, subtree: true });
  return () => observer.disconnect();
}

onShadowRoot(adoptEditors);
