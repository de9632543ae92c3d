// The explorer's exports: the trace (JSON or text downloaded, Python shown to copy) and the
// self-contained HTML page of every step, both made by Python (export_trace, export_html).

import { downloadText, h } from "../lib/dom";
import { type Rpc, bufferText } from "../lib/rpc";

/** Export the trace: JSON or text as a download, Python copied to the clipboard and shown. Throws
 * what the request failed with. */
export async function exportTrace(rpc: Rpc, format: "json" | "text" | "python", where: { root: HTMLElement; func: string; note(text: string): void }): Promise<void> {
  const reply = await rpc.call("export_trace", { format });
  const text = bufferText(reply.buffers[0]);
  if (format === "python") {
    let copied = false;
    try {
      await navigator.clipboard?.writeText(text);
      copied = !!navigator.clipboard;
    } catch {
      copied = false;
    }
    showPython(where.root, text, copied);
  } else {
    downloadText(`${where.func || "schedule"}_trace.${format === "json" ? "json" : "txt"}`, text, format === "json" ? "application/json" : "text/plain");
    where.note(`trace exported as ${format}`);
  }
}

/** The schedule function as Python, in a dialog to copy it from (`copied`: it is on the clipboard). */
export function showPython(root: HTMLElement, text: string, copied: boolean): void {
  const area = h("textarea", { class: "mlc-python-text", readonly: true, rows: "14" }) as HTMLTextAreaElement;
  area.value = text;
  const card = h(
    "div",
    { class: "mlc-help-card mlc-python-card" },
    h("b", {}, copied ? "Copied to the clipboard:" : "Copy this schedule function:"),
    area,
    h("button", { class: "mlc-btn", onclick: () => overlay.remove() }, "Close"),
  );
  const overlay = h("div", { class: "mlc-help mlc-python-dialog" }, card);
  root.append(overlay);
  area.select();
}

/** Download the self-contained HTML page of every step. */
export async function exportHtml(rpc: Rpc, func: string): Promise<void> {
  const reply = await rpc.call("export_html");
  downloadText(`${func || "explorer"}_schedule.html`, bufferText(reply.buffers[0]), "text/html");
}
