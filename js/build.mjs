// Bundle each widget entry into one self-contained ES module under mlc_lab/static/.
// anywidget loads `_esm` from a string, so there is no code splitting and CSS is inlined as text.
import * as esbuild from "esbuild";

const dev = process.argv.includes("--dev");
const watch = process.argv.includes("--watch");

const options = {
  entryPoints: {
    explorer: "js/explorer.ts",
    access_view: "js/access_view.ts", // AccessView (the access panel alone; the explorer embeds the same panel)
    tuning_dashboard: "js/tuning_dashboard.ts", // TuningDashboard (bundles plotly.js-basic-dist-min)
  },
  outdir: "mlc_lab/static",
  bundle: true,
  format: "esm",
  target: "es2022",
  minify: !dev,
  sourcemap: dev ? "inline" : false,
  loader: { ".css": "text" },
  define: { "define.amd": "false" }, // UMD deps must not register with a page's requirejs
  legalComments: "none",
  logLevel: "info",
};

if (watch) {
  const ctx = await esbuild.context(options);
  await ctx.watch();
} else {
  await esbuild.build(options);
}
