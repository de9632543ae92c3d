// Colours come from JupyterLab's --jp-* CSS variables, so the widgets follow the light/dark theme
// without knowing which one is active. Each variable has a fallback for hosts without JupyterLab
// (VS Code, Colab, a static page). DOM-only: CodeMirror themes live in ./cm_theme.ts, so a widget
// without an editor (the tuning dashboard) does not pull CodeMirror into its bundle.

import { registerStyle } from "./styles";

/** `var(--jp-name, fallback)`. */
export function jp(name: string, fallback: string): string {
  return `var(--jp-${name}, ${fallback})`;
}

/** True when the page shows a dark JupyterLab theme (or, outside Lab, prefers dark). */
export function isDarkTheme(doc: Document = document): boolean {
  const light = doc.body?.dataset?.jpThemeLight;
  if (light === "true") return false;
  if (light === "false") return true;
  return typeof window !== "undefined" && !!window.matchMedia?.("(prefers-color-scheme: dark)").matches;
}

/** Install a stylesheet once per root that holds mlc_lab widgets: the document, or the shadow root a
 * host such as marimo renders each widget in (see ./styles.ts). `doc` is where it goes when no
 * widget root is known (code that draws outside a widget's render). */
export function ensureStyle(id: string, css: string, doc: Document = document): void {
  registerStyle(id, css, doc);
}
