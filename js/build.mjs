// Bundle the front end into self-contained ES modules under mlc_lab/static/.
// anywidget loads `_esm` from a string, so there is no code splitting and CSS is inlined as text.
import * as esbuild from "esbuild";

const dev = process.argv.includes("--dev");
const watch = process.argv.includes("--watch");

const options = {
  entryPoints: {
    // The page's one front end: the explorer, the access view and the tuning dashboard in one
    // bundle (CodeMirror and plotly shared). Widgets never carry it: each carries the loader
    // (a few hundred bytes), which imports this bundle once per page from the model-only
    // FrontEnd widget (mlc_lab/widgets/_base.py). See js/loader.ts.
    mlc_lab: "js/mlc_lab.ts",
    loader: "js/loader.ts",
    saved_page: "js/saved_page.ts", // inlined into `mlc-lab export` pages (saved widgets, no kernel)
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
