// Entry of the Explorer widget bundle (mlc_lab/static/explorer.js).

import type { RenderProps } from "@anywidget/types";
import { ensureStyle } from "./lib/theme";
import type { ExplorerModel } from "./lib/types";
import css from "./explorer/explorer.css";
import { ExplorerView } from "./explorer/view";

function render({ model, el }: RenderProps<ExplorerModel>) {
  ensureStyle("mlc-lab-explorer-style", css);
  const view = new ExplorerView(model);
  el.classList.add("mlc-lab");
  el.append(view.root);
  return () => view.dispose();
}

export default { render };
