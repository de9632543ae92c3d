// Entry of the TuningDashboard widget bundle (mlc_lab/static/tuning_dashboard.js).

import type { RenderProps } from "@anywidget/types";
import { ensureStyle } from "./lib/theme";
import css from "./tuning/dashboard.css";
import type { TuningTraits } from "./lib/model";
import { DashboardView } from "./tuning/view";

function render({ model, el, host }: RenderProps<TuningTraits>) {
  ensureStyle("mlc-lab-tuning-style", css);
  const view = new DashboardView(model, host);
  el.classList.add("mlc-lab");
  el.append(view.root);
  return () => view.dispose();
}

export default { render };
