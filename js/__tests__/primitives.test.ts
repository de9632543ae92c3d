import { describe, expect, it } from "vitest";
import { applicable, buildCall, checkFactors, defaultFactors, defaultValues, divisors, parseLiteral, presetsFor } from "../explorer/primitives";
import { TreeIndex } from "../explorer/tree";
import { loop, mmRelu } from "./fixtures";

const t = new TreeIndex(mmRelu());
const names = (sel: string, kind = "loop") => applicable(t.find({ kind: kind as "loop", name: sel }), t).map((o) => o.spec.name);

describe("which primitives apply", () => {
  it("offers loop primitives for a loop, with reorder/fuse only in a nest", () => {
    const k = names("k");
    expect(k).toEqual(expect.arrayContaining(["split", "reorder", "unroll", "bind", "rfactor", "sample_perfect_tile", "decompose_reduction"]));
    expect(k).not.toContain("fuse"); // k has no loop under it
    // k is a reduction loop: TVM refuses to parallelize or vectorize it, so neither is offered
    expect(k).not.toContain("parallel");
    expect(k).not.toContain("vectorize");
    expect(names("C/j")).toEqual(expect.arrayContaining(["parallel", "vectorize"]));
    expect(names("Y/i")).toContain("fuse");
    expect(names("C/j")).not.toContain("rfactor"); // not a reduction loop
    expect(names("C/j")).not.toContain("decompose_reduction");
  });

  it("offers block primitives for a block", () => {
    const y = names("Y", "block");
    expect(y).toEqual(expect.arrayContaining(["compute_at", "cache_read", "cache_write", "decompose_reduction"]));
    expect(y).not.toContain("reverse_compute_at"); // Y has no producer in the function
    expect(y).not.toContain("compute_inline"); // a reduction cannot be inlined
    expect(names("C", "block")).toEqual(expect.arrayContaining(["compute_inline", "reverse_compute_inline"]));
    expect(names("C", "block")).not.toContain("decompose_reduction");
  });

  it("hides what is already done", () => {
    const tree = mmRelu();
    (tree.functions[0].children[0] as any).loop_kind = "parallel";
    const idx = new TreeIndex(tree);
    expect(applicable(idx.findName("Y/i"), idx).map((o) => o.spec.name)).not.toContain("parallel");
  });

  it("offers nothing without a selection or for the function", () => {
    expect(applicable(undefined, t)).toEqual([]);
    expect(applicable(t.entries[0], t)).toEqual([]);
  });

  it("gives forms valid choices", () => {
    const c = applicable(t.find({ kind: "block", name: "C" }), t).find((o) => o.spec.name === "reverse_compute_at")!;
    const loopField = c.fields.find((f) => f.name === "loop") as any;
    expect(loopField.options.map((o: any) => o.value)).toEqual(["Y/i", "Y/j", "k"]);
    const cr = applicable(t.find({ kind: "block", name: "Y" }), t).find((o) => o.spec.name === "cache_read")!;
    expect((cr.fields[0] as any).options.map((o: any) => o.label)).toEqual(["A[vi, vk]", "B[vk, vj]"]);
  });
});

describe("building the Session.apply call", () => {
  const offer = (sel: string, kind: string, p: string) => {
    const entry = t.find({ kind: kind as "loop", name: sel })!;
    const o = applicable(entry, t).find((x) => x.spec.name === p)!;
    return { entry, o, values: defaultValues(o.fields) };
  };

  it("the buffer-level primitives of TVM 0.27 (set_scope, unsafe_set_dtype, rolling_buffer, add_unit_loop)", () => {
    const scope = offer("Y", "block", "set_scope");
    expect(scope.o.fields.map((f) => f.name)).toEqual(["buffer_index", "storage_scope"]);
    expect(buildCall(scope.o.spec, scope.entry, scope.values)).toEqual({
      primitive: "set_scope", args: [], kwargs: { block: "Y", buffer_index: 0, storage_scope: "shared" },
    });
    const dtype = offer("Y", "block", "unsafe_set_dtype");
    expect(buildCall(dtype.o.spec, dtype.entry, dtype.values).kwargs).toEqual({ block: "Y", buffer_index: 0, dtype: "float16" });
    const rolling = offer("Y", "block", "rolling_buffer");
    expect(buildCall(rolling.o.spec, rolling.entry, rolling.values).kwargs).toEqual({ block: "Y", write_buffer_index: 0 });
    const unit = offer("C", "block", "add_unit_loop");
    expect(buildCall(unit.o.spec, unit.entry, unit.values)).toEqual({ primitive: "add_unit_loop", args: ["C"], kwargs: {} });
  });

  it("split", () => {
    const { entry, o, values } = offer("Y/j", "loop", "split");
    values.factors = [null, 4];
    expect(buildCall(o.spec, entry, values)).toEqual({ primitive: "split", args: [], kwargs: { loop: "Y/j", factors: [null, 4] } });
  });

  it("reorder passes the loops positionally", () => {
    const { entry, o, values } = offer("Y/j", "loop", "reorder");
    expect(values.ordered_loops).toEqual(["Y/i", "Y/j", "k"]);
    values.ordered_loops = ["Y/i", "k", "Y/j"];
    expect(buildCall(o.spec, entry, values)).toEqual({ primitive: "reorder", args: ["Y/i", "k", "Y/j"], kwargs: {} });
  });

  it("compute_at, decompose_reduction, cache_read, bind, annotate, sample_perfect_tile", () => {
    let x = offer("C", "block", "reverse_compute_at");
    x.values.loop = "Y/j";
    expect(buildCall(x.o.spec, x.entry, x.values).kwargs).toEqual({ block: "C", loop: "Y/j", preserve_unit_loops: false });
    x = offer("Y", "block", "decompose_reduction");
    expect(buildCall(x.o.spec, x.entry, x.values).kwargs).toEqual({ block: "Y", loop: "Y/i" });
    x = offer("k", "loop", "decompose_reduction");
    expect(buildCall(x.o.spec, x.entry, x.values).kwargs).toEqual({ block: "Y", loop: "k" });
    x = offer("Y", "block", "cache_read");
    expect(buildCall(x.o.spec, x.entry, x.values).kwargs).toEqual({ block: "Y", read_buffer_index: 0, storage_scope: "shared" });
    x = offer("Y/i", "loop", "bind");
    expect(buildCall(x.o.spec, x.entry, x.values).kwargs).toEqual({ loop: "Y/i", thread_axis: "blockIdx.x" });
    x = offer("Y/i", "loop", "annotate");
    x.values.ann_key = "pragma_unroll";
    x.values.ann_val = "16";
    expect(buildCall(x.o.spec, x.entry, x.values).kwargs).toEqual({ block_or_loop: "Y/i", ann_key: "pragma_unroll", ann_val: 16 });
    x = offer("k", "loop", "sample_perfect_tile");
    expect(buildCall(x.o.spec, x.entry, x.values)).toEqual({ primitive: "sample_perfect_tile", args: [], kwargs: { loop: "k", n: 2, max_innermost_factor: 16 }, then_split: true });
  });
});

describe("split factors", () => {
  it("divisors", () => {
    expect(divisors(12)).toEqual([1, 2, 3, 4, 6, 12]);
    expect(divisors(1)).toEqual([1]);
    expect(divisors(49)).toEqual([1, 7, 49]);
  });

  it("default factors leave the outer one blank", () => {
    expect(defaultFactors(128, 2)).toEqual([null, 8]);
    expect(defaultFactors(128, 3)[0]).toBeNull();
    expect(defaultFactors(7, 2)).toEqual([null, null]); // a prime: nothing sensible
  });

  it("explains inferred factors and predicates in words", () => {
    expect(checkFactors(128, [null, 4])).toMatchObject({ ok: true, predicate: false, inferred: 32 });
    expect(checkFactors(128, [null, 5])).toMatchObject({ ok: true, predicate: true, inferred: 26 });
    expect(checkFactors(128, [null, 5]).message).toMatch(/predicate/);
    expect(checkFactors(128, [8, 16])).toMatchObject({ ok: true, predicate: false });
    expect(checkFactors(128, [10, 13])).toMatchObject({ ok: true, predicate: true });
    expect(checkFactors(128, [4, 4]).ok).toBe(false);
    expect(checkFactors(128, [null, null]).ok).toBe(false);
    expect(checkFactors(128, [0, 4]).ok).toBe(false);
    expect(checkFactors(null, [null, 4]).ok).toBe(true);
  });

  it("refuses a factor larger than the loop, or past a 32-bit extent, before the kernel sees it", () => {
    // Before: 99999999999999999999 reached TVM (an FFI type error about a BigInt) and 256 on a loop of
    // 128 was applied without a word (an outer loop of one iteration, half the inner one skipped).
    expect(checkFactors(128, [null, 256])).toEqual({ ok: false, message: "The factor 256 is larger than the loop (128 iterations): use at most 128." });
    expect(checkFactors(128, [200, null]).ok).toBe(false);
    expect(checkFactors(128, [null, 128]).ok).toBe(true);
    expect(checkFactors(128, [null, 99999999999999999999])).toEqual({ ok: false, message: "A factor is at most 2,147,483,647 (a loop's extent is a 32-bit integer)." });
    expect(checkFactors(null, [null, 2 ** 31]).ok).toBe(false); // a symbolic extent too
  });

  it("presets are the divisors left for a position", () => {
    expect(presetsFor(128, [null, 4], 0)).toEqual([1, 2, 4, 8, 16, 32]);
    expect(presetsFor(128, [null, null], 1)).toEqual(divisors(128));
    expect(presetsFor(null, [null, 4], 0)).toEqual([]);
  });

  it("parses annotation values", () => {
    expect(parseLiteral("16")).toBe(16);
    expect(parseLiteral("0.5")).toBe(0.5);
    expect(parseLiteral("True")).toBe(true);
    expect(parseLiteral("'unroll'")).toBe("unroll");
    expect(parseLiteral(" x ")).toBe("x");
  });
});

it("symbolic extents give no divisor presets", () => {
  const tree = { func: "f", functions: [{ kind: "func" as const, name: "f", buffers: [], children: [loop("n", "n" as unknown as number)] }] };
  const idx = new TreeIndex(tree);
  const split = applicable(idx.findName("n"), idx).find((o) => o.spec.name === "split")!;
  expect((split.fields[0] as any).extent).toBeNull();
  expect(applicable(idx.findName("n"), idx).map((o) => o.spec.name)).not.toContain("sample_perfect_tile");
});
