// Notebooks the commands write: a new exploration of a course program or a .py file, a tuning
// run's dashboard, a trace replayed in the explorer. Plain JSON (nbformat 4), written through the
// contents API, then opened; the widgets come from running them in a kernel.

export interface Settings {
  target: string;
  trials: number;
  workDirRoot: string;
  documentKernel: boolean; // a trace or tuning-run document starts a kernel of its own when it opens
}

export const DEFAULT_SETTINGS: Settings = { target: "cpu", trials: 64, workDirRoot: "mlc_tune", documentKernel: true };

function lines(text: string): string[] {
  const out = text.split("\n").map((l) => `${l}\n`);
  if (out.length) out[out.length - 1] = out[out.length - 1].replace(/\n$/, "");
  return out;
}

const code = (text: string) => ({ cell_type: "code", metadata: {}, source: lines(text), outputs: [], execution_count: null });
const markdown = (text: string) => ({ cell_type: "markdown", metadata: {}, source: lines(text) });

function notebook(cells: object[]): object {
  return {
    nbformat: 4,
    nbformat_minor: 5,
    metadata: { kernelspec: { name: "python3", display_name: "Python 3 (ipykernel)", language: "python" } },
    cells,
  };
}

/** A Python string literal for a value (JSON's escaping is valid Python for strings). */
export const py = (s: string) => JSON.stringify(s);

export type ProgramChoice = { kind: "course"; name: string; title: string } | { kind: "file"; path: string };

export function explorationNotebook(choice: ProgramChoice, settings: Settings): object {
  const title = choice.kind === "course" ? choice.title : choice.path;
  const program = choice.kind === "course" ? `mlc_lab.course_program(${py(choice.name)})` : py(choice.path);
  return notebook([
    markdown(`# Schedule exploration: ${title}\n\nRun the cells. Click a loop in the explorer, pick a primitive, apply; or call \`session.apply(...)\` in a cell below: both show in the explorer.`),
    code(`import mlc_lab\n\nexplorer = mlc_lab.explore(${program})\nsession = explorer.session\nexplorer`),
    code(`# Measure the current step on the default target (Settings > mlc_lab):\n# session.measure(${py(settings.target)})`),
    code(
      `# Tune around this schedule (a work directory under ${settings.workDirRoot}/):\n` +
        `# job = mlc_lab.tune(session, ${py(settings.target)}, trials=${settings.trials}, work_dir=${py(`${settings.workDirRoot}/run`)})\n` +
        "# mlc_lab.dashboard(job, session)",
    ),
  ]);
}

export function tuningRunNotebook(workDir: string): object {
  return notebook([
    markdown(`# Tuning run \`${workDir}\``),
    code(`import mlc_lab\n\nmlc_lab.open_tuning_run(${py(workDir)})`),
  ]);
}

export function traceNotebook(tracePath: string): object {
  return notebook([
    markdown(`# Trace \`${tracePath}\`\n\nThe trace is parsed (never run) and replayed step by step on the program beside it (same name, \`.py\`).`),
    code(`import mlc_lab\n\nexplorer = mlc_lab.open_trace(${py(tracePath)})\nexplorer`),
  ]);
}

/** The folder part of a server path ("" for the root). */
export function dirname(path: string): string {
  const i = path.lastIndexOf("/");
  return i < 0 ? "" : path.slice(0, i);
}

export function basename(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1);
}
