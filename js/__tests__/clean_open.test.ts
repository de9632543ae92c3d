// Opening a notebook is no change to it (js/labextension/src/clean_open.ts): the kernel filling in
// language_info leaves it clean; anything else, before or after, marks it changed as usual.
import { describe, expect, it } from "vitest";
import { keepCleanOnKernelInfo } from "../labextension/src/clean_open";

/** A notebook model: any change of its content marks it dirty (stateChanged), as JupyterLab's does. */
function notebookModel() {
  const handlers: Array<(s: unknown, a: any) => void> = [];
  let dirty = false;
  const nb = { cells: [{ source: "x = 1" }], metadata: { kernelspec: { name: "python3" }, language_info: { name: "python" } as Record<string, unknown> } };
  const model = {
    get dirty() {
      return dirty;
    },
    set dirty(v: boolean) {
      const old = dirty;
      dirty = v;
      if (old !== v) for (const h of handlers) h(model, { name: "dirty", oldValue: old, newValue: v });
    },
    stateChanged: { connect: (fn: (s: unknown, a: any) => void) => handlers.push(fn) },
    toJSON: () => JSON.parse(JSON.stringify(nb)),
    setMetadata(key: string, value: unknown) {
      (nb.metadata as Record<string, unknown>)[key] = value;
      model.dirty = true;
    },
    editCell(source: string) {
      nb.cells[0].source = source;
      model.dirty = true;
    },
  };
  return model;
}

const KERNEL_INFO = { name: "python", version: "3.11.7", mimetype: "text/x-python", file_extension: ".py" };

describe("opening a notebook", () => {
  it("the kernel's language_info leaves it clean", () => {
    // Before: JupyterLab marked every lecture notebook changed as soon as its kernel started.
    const m = notebookModel();
    keepCleanOnKernelInfo(m);
    m.setMetadata("language_info", KERNEL_INFO);
    expect(m.dirty).toBe(false);
  });

  it("a person's change still marks it changed, and so does metadata of theirs", () => {
    const m = notebookModel();
    keepCleanOnKernelInfo(m);
    m.setMetadata("language_info", KERNEL_INFO);
    m.editCell("x = 2");
    expect(m.dirty).toBe(true);
    const n = notebookModel();
    keepCleanOnKernelInfo(n);
    n.setMetadata("tags", ["lecture"]);
    expect(n.dirty).toBe(true);
  });

  it("after a save, the next edit is a change again", () => {
    const m = notebookModel();
    keepCleanOnKernelInfo(m);
    m.editCell("x = 2");
    m.setMetadata("language_info", KERNEL_INFO);
    expect(m.dirty).toBe(true);
    m.dirty = false; // saved
    m.setMetadata("language_info", { ...KERNEL_INFO, version: "3.11.8" }); // a kernel restarted on another Python
    expect(m.dirty).toBe(false);
    m.editCell("x = 3");
    expect(m.dirty).toBe(true);
  });
});
