// The explorer's Measure, its Cancel and the target they use: the toolbar's controls and the requests
// behind them (mlc_lab/widgets/explorer.py: measure, measure_cancel). Python answers a measurement when it
// is done (seconds): on its own Rpc, with no "working…"; the `measuring` trait says what runs.

import type { AnyModel } from "@anywidget/types";
import { ERROR_KINDS } from "../lib/model";
import { Rpc, RpcFailure } from "../lib/rpc";
import type { ExplorerTraits, StepId } from "../lib/types";
import { measuringStep } from "./history_pane";
import type { Toolbar } from "./toolbar";

export class Measuring {
  private readonly rpc: Rpc;

  constructor(
    private readonly model: AnyModel<ExplorerTraits>,
    private readonly bar: Toolbar,
    private readonly root: HTMLElement,
    private readonly showError: (err: unknown) => void,
  ) {
    this.rpc = new Rpc(model);
    // The toolbar's target is the explorer's (`target` trait): Measure runs there, and the Checks panel
    // lists that target's checks from step 0 on. "" (each step's) shows as cpu until one is picked.
    const follow = () => {
      bar.targetSel.value = model.get("target") || "cpu";
    };
    follow();
    model.on("change:target", follow);
    this.unfollow = () => model.off("change:target", follow);
    bar.targetSel.addEventListener("change", () => {
      model.set("target", bar.targetSel.value);
      model.save_changes();
    });
  }

  private readonly unfollow: () => void;

  /** The toolbar as the `measuring` trait says: "measuring…" and a Cancel while a measurement runs. */
  draw(): void {
    const step = measuringStep(this.model);
    this.root.classList.toggle("mlc-measuring", step !== null);
    this.bar.measureBtn.disabled = step !== null;
    this.bar.cancelMeasureBtn.hidden = step === null;
    this.bar.measureBtn.firstChild!.textContent = step !== null ? "measuring…" : "Measure";
    this.bar.measureBtn.title = step !== null ? `measuring step ${step}…` : "Build, check and time the current step (key m)";
  }

  /** Measure `step` on the toolbar's target; Python answers when it is done. */
  async measure(step: StepId): Promise<void> {
    if (measuringStep(this.model) !== null) return;
    const target = this.bar.targetSel.value || "cpu";
    try {
      await this.rpc.call("measure", { target, step });
    } catch (err) {
      // Python put a measurement failure into the `error` trait (banner); show anything else here,
      // but a Cancel (the person asked for it) and a kernel gone (the notice above says so already).
      const kind = err instanceof RpcFailure ? err.error.type : undefined;
      if (kind !== "cancelled" && kind !== "no_kernel" && !(kind && ERROR_KINDS[kind].measurement)) this.showError(err);
    }
  }

  /** Stop the measurement in flight: Python kills its worker process and answers it "cancelled". */
  async cancel(): Promise<void> {
    try {
      await this.rpc.call("measure_cancel");
    } catch (err) {
      this.showError(err);
    }
  }

  dispose(): void {
    this.unfollow();
    this.rpc.dispose();
  }
}
