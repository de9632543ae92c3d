// The script of an `mlc-lab export` page (mlc_lab/static/saved_page.js, inlined into the page):
// every element `<div class="mlc-lab-saved" data-model-id=...>` becomes its saved widget, from the
// widget state the page carries in `<script type="application/vnd.jupyter.widget-state+json">`.
// No network: the front end comes from that state (the FrontEnd model), decoded in the page.

import { SavedWidgets, type SavedState } from "./lib/saved";

async function main(): Promise<void> {
  const script = document.querySelector('script[type="application/vnd.jupyter.widget-state+json"]');
  const saved: SavedState = script ? (JSON.parse(script.textContent || "{}").state ?? {}) : {};
  const widgets = new SavedWidgets(saved);
  const targets = [...document.querySelectorAll<HTMLElement>(".mlc-lab-saved[data-model-id]")];
  const pending = targets.map(async (el) => {
    const id = el.dataset.modelId ?? "";
    try {
      el.replaceChildren();
      await widgets.render(id, el);
      el.dataset.rendered = "true";
    } catch (err) {
      el.textContent = `mlc_lab could not show this widget: ${err instanceof Error ? err.message : String(err)}`;
      el.dataset.rendered = "error";
    }
  });
  await Promise.all(pending);
  document.body.dataset.mlcLabReady = "true";
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", () => void main());
else void main();
