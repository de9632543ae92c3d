// @vitest-environment jsdom
// What one step costs the page: the script pane re-parses and redraws only what it must, and the
// loop tree keeps the rows a step did not change.
import { ensureSyntaxTree } from "@codemirror/language";
import { pythonLanguage } from "@codemirror/lang-python";
import { EditorState } from "@codemirror/state";
import { describe, expect, it, vi } from "vitest";
import { CodeView } from "../explorer/code";
import { TreeIndex } from "../explorer/tree";
import { renderTree } from "../explorer/tree_view";
import { type ParseCounts, cachedPython, cachingParser } from "../lib/cached_python";
import type { LoopTree } from "../lib/types";
import { mmRelu } from "./fixtures";

const BEFORE = [
  "@T.prim_func",
  "def mm_relu(A: T.Buffer((128, 128), 'float32')):",
  "    for i, j_0 in T.grid(128, 32):",
  "        for j_1_init in range(4):",
  "            with T.sblock('Y_init'):",
  "                vi = T.axis.spatial(128, i)",
  "                Y[vi, vj] = T.float32(0.0)",
  "        for k, j_1 in T.grid(128, 4):",
  "            with T.sblock('Y_update'):",
  "                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]",
].join("\n");
const AFTER = BEFORE.replace("for j_1_init in range(4):", "for j_1_init in T.unroll(4):");

describe("a parser that keeps recent trees", () => {
  it("answers a text it has parsed with the same tree, and parses a new text", () => {
    const counts: ParseCounts = { parsed: 0, reused: 0 };
    const parser = cachingParser(pythonLanguage.parser, 4, counts);
    const a = parser.parse(BEFORE);
    const b = parser.parse(AFTER);
    expect(counts).toEqual({ parsed: 2, reused: 0 });
    expect(parser.parse(BEFORE)).toBe(a);
    expect(parser.parse(AFTER)).toBe(b);
    expect(counts).toEqual({ parsed: 2, reused: 2 });
    expect(a.toString()).toBe(pythonLanguage.parser.parse(BEFORE).toString());
    expect(b.toString()).not.toBe(a.toString());
  });

  it("forgets the oldest text beyond its size", () => {
    const counts: ParseCounts = { parsed: 0, reused: 0 };
    const parser = cachingParser(pythonLanguage.parser, 2, counts);
    for (const t of ["x = 1", "x = 2", "x = 3", "x = 1"]) parser.parse(t);
    expect(counts).toEqual({ parsed: 4, reused: 0 });
    parser.parse("x = 3");
    expect(counts.reused).toBe(1);
  });

  it("gives an editor stepping back to a shown text its tree without a parse", () => {
    const counts: ParseCounts = { parsed: 0, reused: 0 };
    let state = EditorState.create({ doc: BEFORE, extensions: [cachedPython(counts)] });
    const full = (s: EditorState) => ensureSyntaxTree(s, s.doc.length, 5000)!.toString();
    expect(full(state)).toBe(pythonLanguage.parser.parse(BEFORE).toString());
    const at = BEFORE.indexOf("range(4)");
    state = state.update({ changes: { from: at, to: at + "range".length, insert: "T.unroll" } }).state;
    expect(full(state)).toBe(pythonLanguage.parser.parse(AFTER).toString());
    const parsed = counts.parsed;
    state = state.update({ changes: { from: at, to: at + "T.unroll".length, insert: "range" } }).state; // undo
    expect(full(state)).toBe(pythonLanguage.parser.parse(BEFORE).toString());
    expect(counts.parsed).toBe(parsed);
    expect(counts.reused).toBeGreaterThanOrEqual(1);
  });
});

describe("the script pane on a one-line step", () => {
  it("keeps the other lines' elements and marks the changed line", () => {
    const host = document.createElement("div");
    document.body.append(host);
    const code = new CodeView(host, () => {});
    code.update(BEFORE, { changed: [], selected: null, involved: [] });
    const lines = () => Array.from(host.querySelectorAll<HTMLElement>(".mlc-code-main .cm-line"));
    const before = lines();
    expect(before.length).toBe(BEFORE.split("\n").length);
    code.update(AFTER, { changed: [4], selected: null, involved: [] });
    const after = lines();
    expect(code.text).toBe(AFTER);
    expect(after[3].textContent).toContain("T.unroll(4)");
    expect(after[3].classList.contains("mlc-line-changed")).toBe(true);
    // Every line but the changed one is the same element: no whole-document replace or redraw.
    const kept = after.filter((l, i) => i !== 3 && l === before[i]).length;
    expect(kept).toBe(before.length - 1);
    code.dispose();
    host.remove();
  });
});

describe("the loop tree on a step that changes one row", () => {
  const withKind = (tree: LoopTree, name: string, kind: string): LoopTree => {
    const copy = JSON.parse(JSON.stringify(tree)) as LoopTree;
    const visit = (n: { kind: string; name?: string; loop_kind?: string; children?: unknown[] }) => {
      if (n.kind === "loop" && n.name === name) n.loop_kind = kind;
      for (const c of (n.children ?? []) as (typeof n)[]) visit(c);
    };
    for (const f of copy.functions) visit(f as never);
    return copy;
  };

  it("keeps every other row's element, and a kept row acts on the new entry", () => {
    const host = document.createElement("div");
    const state = { selectedKey: null, involvedKeys: new Set<string>(), collapsed: new Set<string>() };
    const onSelect = vi.fn();
    renderTree(host, new TreeIndex(mmRelu()), state, onSelect, () => {});
    const before = Array.from(host.children) as HTMLElement[];
    const index = new TreeIndex(withKind(mmRelu(), "k", "unrolled"));
    renderTree(host, index, state, onSelect, () => {});
    const after = Array.from(host.children) as HTMLElement[];
    expect(after.length).toBe(before.length);
    const changed = after.filter((r, i) => r !== before[i]);
    expect(changed.map((r) => r.dataset.name)).toEqual(["k"]);
    expect(changed[0].querySelector(".mlc-kind-unrolled")).not.toBeNull();
    const kept = after.find((r) => r.dataset.name === "Y/i")!;
    expect(kept).toBe(before.find((r) => r.dataset.name === "Y/i"));
    kept.click();
    expect(onSelect).toHaveBeenCalledWith(index.entries.find((e) => e.ref === "Y/i"));
  });
});
