// The one front-end module of a page (mlc_lab/static/mlc_lab.js): every widget class's view, in one
// bundle, so that shared code (CodeMirror, plotly, the access panel) is loaded and saved once.
// Widgets do not carry this bundle: they carry js/loader.ts, which imports it from the page's
// model-only FrontEnd widget (mlc_lab/widgets/_base.py). Static pages import it directly.

import access_view from "./access_view";
import { class_dashboard, leaderboard } from "./classroom";
import explorer from "./explorer";
import { explorerOffline } from "./explorer/offline";
import { mountStyles } from "./lib/styles";
import tuning_dashboard from "./tuning_dashboard";

type View = { render: (props: any) => unknown };

/** A view whose stylesheets go to the root that holds its element (the document, or the shadow root
 * marimo and MyST render a widget in: lib/styles.ts), for as long as it is shown. */
function styled<V extends View>(view: V): V {
  const render = (props: { el: HTMLElement }) => {
    const unmount = mountStyles(props.el);
    const done = (cleanup: unknown) => () => {
      if (typeof cleanup === "function") cleanup();
      unmount();
    };
    let out: unknown;
    try {
      out = view.render(props);
    } catch (err) {
      unmount();
      throw err;
    }
    if (out && typeof (out as Promise<unknown>).then === "function") {
      return (out as Promise<unknown>).then(done, (err) => {
        unmount();
        throw err;
      });
    }
    return done(out);
  };
  return { ...view, render };
}

export const widgets = {
  explorer: styled(explorer),
  access_view: styled(access_view),
  tuning_dashboard: styled(tuning_dashboard),
  leaderboard: styled(leaderboard),
  class_dashboard: styled(class_dashboard),
};

/** What a view answers by itself without a kernel (beyond the replies its widget recorded). */
export const offline = { explorer: explorerOffline };

export default { widgets, offline };
