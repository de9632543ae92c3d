// Entry of the Explorer widget bundle (mlc_lab/static/explorer.js).

import type { RenderProps } from "@anywidget/types";
import { ensureStyle } from "./lib/theme";
import type { ExplorerTraits } from "./lib/model";
import css from "./explorer/explorer.css";
import css_path from "./path/path.css";
import { ExplorerView } from "./explorer/view";
import css_class from "./classroom/classroom.css";
import { SubmitBar } from "./classroom/submit";

function render({ model, el }: RenderProps<ExplorerTraits>) {
  ensureStyle("mlc-lab-explorer-style", css);
  ensureStyle("mlc-lab-path-style", css_path);
  const view = new ExplorerView(model);
  el.classList.add("mlc-lab");
  el.append(view.root);
  // The Submit bar (shown only with a class server), a row under the toolbar.
  ensureStyle("mlc-lab-classroom-style", css_class);
  const submit = new SubmitBar(model as any);
  view.root.querySelector(".mlc-toolbar")?.after(submit.el);
  return () => {
    submit.dispose();
    view.dispose();
  };
}

export default { render };
