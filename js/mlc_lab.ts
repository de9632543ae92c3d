// The one front-end module of a page (mlc_lab/static/mlc_lab.js): every widget class's view, in one
// bundle, so that shared code (CodeMirror, plotly, the access panel) is loaded and saved once.
// Widgets do not carry this bundle: they carry js/loader.ts, which imports it from the page's
// model-only FrontEnd widget (mlc_lab/widgets/_base.py). Static pages import it directly.

import access_view from "./access_view";
import { class_dashboard, leaderboard } from "./classroom";
import explorer from "./explorer";
import { explorerOffline } from "./explorer/offline";
import tuning_dashboard from "./tuning_dashboard";

export const widgets = { explorer, access_view, tuning_dashboard, leaderboard, class_dashboard };

/** What a view answers by itself without a kernel (beyond the replies its widget recorded). */
export const offline = { explorer: explorerOffline };

export default { widgets, offline };
