// Bundle the front end into self-contained ES modules under mlc_lab/static/.
// anywidget loads `_esm` from a string, so there is no code splitting and CSS is inlined as text.
import { spawnSync } from "node:child_process";
import { rmSync } from "node:fs";
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

// The JupyterLab extension (js/labextension): its sources are bundled here with JupyterLab's own
// packages left as imports (they are shared singletons at run time), then JupyterLab's builder
// (`jupyter-builder build`, Python package jupyter-builder + npm @jupyter/builder) makes the
// prebuilt labextension in mlc_lab/labextension that the wheel installs (no node at install time).
const labextOptions = {
  entryPoints: { index: "js/labextension/src/index.ts" },
  outdir: "js/labextension/lib",
  bundle: true,
  splitting: true, // the dashboard (plotly) is a lazy chunk: loaded when a tuning run opens
  format: "esm",
  target: "es2022",
  minify: false,
  loader: { ".css": "text" },
  define: { "define.amd": "false" },
  external: ["@jupyterlab/*", "@lumino/*", "@jupyter-widgets/*"],
  legalComments: "none",
  logLevel: "warning",
};

function buildLabextension() {
  const builder = process.env.JUPYTER_BUILDER || "jupyter-builder";
  const args = ["build", ...(dev ? ["--development", "True"] : []), "."];
  const run = spawnSync(builder, args, { stdio: ["ignore", "inherit", "inherit"] });
  if (run.error || run.status !== 0) {
    console.error(`js/build.mjs: \`${builder} ${args.join(" ")}\` failed${run.error ? `: ${run.error.message}` : ""}` +
      " (pip install jupyter-builder, or put the project's .venv/bin on PATH)");
    process.exit(1);
  }
}

const skipLabext = process.argv.includes("--no-labextension");

if (watch) {
  const ctx = await esbuild.context(options);
  await ctx.watch();
} else {
  // The labextension's intermediate bundle (js/labextension/lib) lies under js/, the folder the
  // wheel's build hook compares with mlc_lab/static by modification time (pyproject.toml,
  // [tool.hatch.build.hooks.jupyter-builder]): it is built first, so that the widget bundles end up
  // newer than every file under js/ and a wheel built where the bundles exist needs no npm.
  if (!skipLabext) {
    rmSync("js/labextension/lib", { recursive: true, force: true });
    await esbuild.build(labextOptions);
    buildLabextension();
  }
  await esbuild.build(options);
}
