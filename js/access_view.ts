// Entry of the AccessView widget bundle (mlc_lab/static/access_view.js): the access panel alone,
// with a loop picker. Traits (loop, at, color_by, warp, block, time) hold the view state.

import type { AnyModel, RenderProps } from "@anywidget/types";
import { AccessPanel, type AccessState } from "./access/panel";
import { h } from "./lib/dom";
import { Rpc, bufferText, parseJsonBuffer } from "./lib/rpc";
import type { LoopTree, TreeNode } from "./lib/types";
import type { AccessViewTraits } from "./lib/model";
import type { Region } from "./access/data";

const regionOf = (r: unknown): Region => (r === "touched" || r === "buffer" ? r : "auto");


/** Loops of a loop tree in program order, with their depth (for the picker). */
export function loopOptions(tree: LoopTree): Array<{ ref: string; depth: number; label: string }> {
  const out: Array<{ ref: string; depth: number; label: string }> = [];
  const walk = (nodes: TreeNode[], depth: number) => {
    for (const n of nodes) {
      if (n.kind === "loop") {
        const ref = n.qualified || n.name;
        out.push({ ref, depth, label: `${"  ".repeat(depth)}${ref} (${n.extent}${n.thread ? `, ${n.thread}` : ""})` });
        walk(n.children, depth + 1);
      } else walk(n.children ?? [], depth);
    }
  };
  for (const f of tree.functions ?? []) walk(f.children ?? [], 0);
  return out;
}

export class AccessViewWidget {
  readonly root: HTMLElement;
  readonly panel: AccessPanel;
  private rpc: Rpc;
  private picker: HTMLSelectElement;
  private disposers: Array<() => void> = [];

  constructor(private model: AnyModel<AccessViewTraits>) {
    this.rpc = new Rpc(model);
    this.panel = new AccessPanel({
      request: (method, params) => this.rpc.call(method, params),
      onProgress: (cb) => this.rpc.listen("mlc-progress", (m) => cb(Number(m.done), Number(m.total))),
      saveState: (s) => this.save(s),
      exportHtml: () => void this.exportHtml(),
      // the step shown (a step never changes); none for a plain program
      stepKey: () => {
        const step = model.get("current");
        return step === null || step === undefined ? null : String(step);
      },
    });
    this.picker = h("select", { class: "mlc-acc-picker", title: "the loop whose iterations are shown" }) as HTMLSelectElement;
    this.picker.addEventListener("change", () => {
      this.save({ loop: this.picker.value });
      void this.panel.show(this.picker.value);
    });
    this.root = h("div", { class: "mlc-access-view" }, h("div", { class: "mlc-acc-pick-row" }, "Loop ", this.picker), this.panel.el);
    const height = model.get("height");
    if (height) this.root.style.height = height;
    const on = (name: string, cb: () => void) => {
      model.on(`change:${name}`, cb);
      this.disposers.push(() => model.off(`change:${name}`, cb));
    };
    on("loop_tree_json", () => this.programChanged());
    on("current", () => this.programChanged());
    for (const name of ["loop", "at", "color_by", "warp", "block", "time", "region", "sweep_threads", "shape_vars"] as const) on(name, () => void this.panel.setState({ [name]: model.get(name) } as Partial<AccessState>));
    this.drawPicker();
    void this.panel.setState(this.traitState());
  }

  private traitState(): AccessState {
    const m = this.model;
    return { loop: m.get("loop") ?? "", at: m.get("at") ?? {}, color_by: m.get("color_by") ?? "access", warp: m.get("warp") ?? -1, block: m.get("block") ?? -1, time: m.get("time") ?? -1, region: regionOf(m.get("region")), sweep_threads: m.get("sweep_threads") !== false, shape_vars: m.get("shape_vars") ?? {} };
  }

  private drawPicker(): void {
    const tree = parseJsonBuffer<LoopTree>(this.model.get("loop_tree_json"));
    const loop = this.model.get("loop");
    const opts = loopOptions(tree);
    this.picker.replaceChildren(h("option", { value: "", selected: !loop }, "(pick a loop)"), ...opts.map((o) => h("option", { value: o.ref, selected: o.ref === loop }, o.label)));
  }

  private reloadQueued = false;

  private programChanged(): void {
    // loop_tree_json and current change together in one message: reload once.
    if (this.reloadQueued) return;
    this.reloadQueued = true;
    queueMicrotask(() => {
      this.reloadQueued = false;
      this.drawPicker();
      void this.panel.reload();
    });
  }

  private save(s: Partial<AccessState>): void {
    for (const [k, v] of Object.entries(s)) this.model.set(k as keyof AccessViewTraits, v as never);
    this.model.save_changes();
  }

  private async exportHtml(): Promise<void> {
    try {
      const reply = await this.rpc.call("export_html");
      const url = URL.createObjectURL(new Blob([bufferText(reply.buffers[0])], { type: "text/html" }));
      const a = h("a", { href: url, download: `access_${(this.model.get("loop") || "view").replace(/[^\w-]+/g, "_")}.html`, style: { display: "none" } });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 1000);
    } catch {
      /* the panel shows request errors of its own; an export failure only loses the download */
    }
  }

  dispose(): void {
    for (const d of this.disposers) d();
    this.panel.dispose();
    this.rpc.dispose();
    this.root.remove();
  }
}

function render({ model, el }: RenderProps<AccessViewTraits>) {
  const view = new AccessViewWidget(model);
  el.classList.add("mlc-lab");
  el.append(view.root);
  return () => view.dispose();
}

export default { render };
