import { describe, expect, it } from "vitest";
import { TreeIndex, lineSpan } from "../explorer/tree";
import { applicable } from "../explorer/primitives";
import { block, loop, mmRelu } from "./fixtures";

describe("TreeIndex", () => {
  const t = new TreeIndex(mmRelu());

  it("indexes every node in pre-order with unique keys", () => {
    expect(t.entries.map((e) => e.key)).toEqual(["func:mm_relu", "loop:Y/i", "loop:Y/j", "loop:k", "block:Y", "loop:C/i", "loop:C/j", "block:C"]);
    expect(t.entries.map((e) => e.depth)).toEqual([0, 1, 2, 3, 4, 1, 2, 3]);
  });

  it("finds by selection, qualified name or plain name", () => {
    expect(t.find({ kind: "loop", name: "C/j" })?.ref).toBe("C/j");
    expect(t.findName("k")?.ref).toBe("k");
    expect(t.findName("j")?.ref).toBe("Y/j"); // first match when ambiguous
    expect(t.find({ kind: "block", name: "nope" })).toBeUndefined();
    expect(t.find(null)).toBeUndefined();
  });

  it("findAll maps error 'involved' names to nodes", () => {
    expect(t.findAll(["k", "Y"]).map((e) => e.key)).toEqual(["loop:k", "block:Y"]);
  });

  it("picks the deepest node at a line of the script", () => {
    expect(t.atLine(15)?.key).toBe("block:Y");
    expect(t.atLine(12)?.key).toBe("loop:k"); // a T.grid line holds three loops: the innermost wins
    expect(t.atLine(1)).toBeUndefined();
  });

  it("offers the perfectly nested chain for reorder and the run below for fuse", () => {
    const j = t.find({ kind: "loop", name: "Y/j" })!;
    expect(t.reorderChain(j).map((e) => e.ref)).toEqual(["Y/i", "Y/j", "k"]);
    expect(t.fuseRun(j).map((e) => e.ref)).toEqual(["Y/j", "k"]);
    expect(t.reorderChain(t.find({ kind: "block", name: "Y" })!)).toEqual([]);
  });

  it("stops a chain at a loop with two children", () => {
    const tree = {
      func: "f",
      functions: [{ kind: "func" as const, name: "f", buffers: [], children: [loop("a", 4, [loop("b", 4, [block("X", ["spatial"])]), loop("c", 4)])] }],
    };
    const idx = new TreeIndex(tree);
    expect(idx.reorderChain(idx.findName("b")!).map((e) => e.ref)).toEqual(["b"]);
    expect(idx.fuseRun(idx.findName("a")!).map((e) => e.ref)).toEqual(["a"]);
  });

  it("compute_at targets are the loops outside the block's own nest", () => {
    const c = t.find({ kind: "block", name: "C" })!;
    expect(t.computeAtTargets(c).map((e) => e.ref)).toEqual(["Y/i", "Y/j", "k"]);
    expect(t.ancestorLoops(c).map((e) => e.ref)).toEqual(["C/i", "C/j"]);
  });

  it("compute_at offers only the consumers' loops, reverse_compute_at only the producers'", () => {
    const c = t.find({ kind: "block", name: "C" })!;
    const y = t.find({ kind: "block", name: "Y" })!;
    expect(t.computeAtTargets(y, "consumers").map((e) => e.ref)).toEqual(["C/i", "C/j"]);
    expect(t.computeAtTargets(c, "consumers")).toEqual([]); // C feeds nothing: no loop where compute_at works
    expect(t.computeAtTargets(c, "producers").map((e) => e.ref)).toEqual(["Y/i", "Y/j", "k"]);
    expect(t.computeAtTargets(y, "producers")).toEqual([]); // Y reads only the function's inputs
    const offered = (b: string) => applicable(t.find({ kind: "block", name: b }), t).map((o) => o.spec.name);
    expect(offered("C")).not.toContain("compute_at");
    expect(offered("C")).toContain("reverse_compute_at");
    expect(offered("Y")).toContain("compute_at");
    expect(offered("Y")).not.toContain("reverse_compute_at");
  });

  it("navigates like a list", () => {
    const k = t.findName("k")!;
    expect(t.next(k, 1)?.key).toBe("block:Y");
    expect(t.next(k, -1)?.key).toBe("loop:Y/j");
    expect(t.next(undefined, 1)?.key).toBe("func:mm_relu");
    expect(t.next(t.entries.at(-1), 1)?.key).toBe("block:C");
    expect(t.firstChild(k)?.key).toBe("block:Y");
    expect(lineSpan(k.node)).toEqual([12, 19]);
  });

  it("accepts an empty tree", () => {
    expect(new TreeIndex({}).size).toBe(0);
  });
});
