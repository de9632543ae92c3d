// The catalogue of schedule primitives the explorer offers: which apply to a selected loop or
// block, which fields their forms have (with valid choices taken from the loop tree), and how a
// filled form becomes a Session.apply call. Pure: no DOM, so vitest checks it directly.

import { THREAD_AXES } from "../lib/model";
import type { BlockNode, LoopNode } from "../lib/types";
import { type Entry, type TreeIndex, intExtent, isBlock, isLoop } from "./tree";

export interface Option {
  value: string;
  label: string;
}

export type Field =
  | { kind: "factors"; name: "factors"; label: string; extent: number | null; parts: number }
  | { kind: "order"; name: "ordered_loops"; label: string; loops: Option[] }
  | { kind: "run"; name: "loops"; label: string; loops: Option[] }
  | { kind: "choice"; name: string; label: string; options: Option[]; value?: string }
  | { kind: "int"; name: string; label: string; value: number; min?: number; max?: number }
  | { kind: "text"; name: string; label: string; value: string; placeholder?: string }
  | { kind: "bool"; name: string; label: string; value: boolean };

export interface PrimitiveSpec {
  name: string;
  help: string;
  key?: string; // keyboard shortcut
  target: "loop" | "block";
  /** Fields for this target, or null when the primitive does not apply to it. */
  fields(entry: Entry, tree: TreeIndex): Field[] | null;
}

export interface ApplyCall {
  primitive: string;
  args: unknown[];
  kwargs: Record<string, unknown>;
  then_split?: boolean;
}

// What bind accepts, generated from mlc_lab/model/steps.py (the Session refuses any other).
export { THREAD_AXES };

export const STORAGE_SCOPES = ["global", "shared", "shared.dyn", "local", "global.texture", "wmma.accumulator"];

const opt = (e: Entry): Option => ({ value: e.ref, label: loopLabel(e) });

function loopLabel(e: Entry): string {
  const n = e.node;
  return isLoop(n) ? `${e.ref} (${n.extent})` : e.ref;
}

function reduceLoopNames(block: BlockNode): Set<string> {
  const names = new Set<string>();
  for (const iv of block.iter_vars ?? []) {
    if (iv.kind !== "reduce" && iv.kind !== "R") continue;
    for (const m of String(iv.binding ?? "").matchAll(/[A-Za-z_][A-Za-z0-9_]*/g)) names.add(m[0]);
  }
  return names;
}

function hasReduce(block: BlockNode): boolean {
  return (block.iter_vars ?? []).some((iv) => iv.kind === "reduce" || iv.kind === "R");
}

/** Is this loop bound into a reduction iterator of some block below it? */
export function isReductionLoop(entry: Entry, tree: TreeIndex): boolean {
  const loop = entry.node as LoopNode;
  return tree.blocksUnder(entry).some((b) => reduceLoopNames(b.node as BlockNode).has(loop.name));
}

const isRootBlock = (e: Entry) => isBlock(e.node) && (e.node.name === "root" || e.parent?.node.kind === "func") && e.node.children.length > 0 && !(e.node.iter_vars ?? []).length;

export const PRIMITIVES: PrimitiveSpec[] = [
  {
    name: "split",
    key: "s",
    target: "loop",
    help: "Split a loop into nested loops with the given factors (leave one blank to infer it).",
    fields: (e) => [{ kind: "factors", name: "factors", label: "factors", extent: intExtent(e.node as LoopNode), parts: 2 }],
  },
  {
    name: "reorder",
    key: "r",
    target: "loop",
    help: "Change the order of perfectly nested loops (drag, or use the arrows).",
    fields: (e, t) => {
      const chain = t.reorderChain(e);
      return chain.length >= 2 ? [{ kind: "order", name: "ordered_loops", label: "order (outer → inner)", loops: chain.map(opt) }] : null;
    },
  },
  {
    name: "fuse",
    key: "f",
    target: "loop",
    help: "Fuse this loop with the loops directly nested in it into one loop.",
    fields: (e, t) => {
      const run = t.fuseRun(e);
      return run.length >= 2 ? [{ kind: "run", name: "loops", label: "loops to fuse", loops: run.map(opt) }] : null;
    },
  },
  // TVM parallelizes and vectorizes only data-parallel loops: not offered for a reduction loop.
  { name: "parallel", key: "p", target: "loop", help: "Run the iterations of this loop on several CPU threads.", fields: (e, t) => (kindIs(e, "parallel") || isReductionLoop(e, t) ? null : []) },
  { name: "vectorize", key: "v", target: "loop", help: "Turn this (innermost) loop into SIMD vector instructions.", fields: (e, t) => (kindIs(e, "vectorized") || isReductionLoop(e, t) ? null : []) },
  { name: "unroll", key: "u", target: "loop", help: "Unroll this loop completely.", fields: (e) => (kindIs(e, "unrolled") ? null : []) },
  {
    name: "bind",
    key: "b",
    target: "loop",
    help: "Bind this loop to a GPU thread axis.",
    fields: (e) =>
      kindIs(e, "thread_binding")
        ? null
        : [{ kind: "choice", name: "thread_axis", label: "thread axis", options: THREAD_AXES.map((a) => ({ value: a, label: a })) }],
  },
  {
    name: "decompose_reduction",
    key: "d",
    target: "loop",
    help: "Move the reduction's init statement out, above this loop.",
    fields: (e, t) => {
      const blocks = t.blocksUnder(e).filter((b) => (b.node as BlockNode).has_init);
      return blocks.length ? [{ kind: "choice", name: "block", label: "block", options: blocks.map((b) => ({ value: b.ref, label: b.ref })) }] : null;
    },
  },
  {
    name: "rfactor",
    target: "loop",
    help: "Factor a reduction over this loop into a separate block with an intermediate buffer.",
    fields: (e, t) => (isReductionLoop(e, t) ? [{ kind: "int", name: "factor_axis", label: "factor axis", value: 0, min: 0 }] : null),
  },
  { name: "blockize", target: "loop", help: "Wrap the subtree under this loop into a new block.", fields: () => [] },
  {
    name: "sample_perfect_tile",
    key: "t",
    target: "loop",
    help: "Sample a perfect tiling of this loop (a tunable decision); optionally split by it.",
    fields: (e) =>
      intExtent(e.node as LoopNode)
        ? [
            { kind: "int", name: "n", label: "parts", value: 2, min: 2, max: 6 },
            { kind: "int", name: "max_innermost_factor", label: "max innermost factor", value: 16, min: 1 },
            { kind: "bool", name: "then_split", label: "split by the sample", value: true },
          ]
        : null,
  },
  {
    name: "annotate",
    target: "loop",
    help: "Attach an annotation (key = value) to this loop.",
    fields: () => annotateFields(),
  },
  {
    name: "compute_at",
    key: "c",
    target: "block",
    help: "Compute this (producer) block inside a loop of its consumer.",
    fields: (e, t) => computeAtFields(e, t, "consumers"),
  },
  {
    name: "reverse_compute_at",
    key: "c",
    target: "block",
    help: "Compute this (consumer) block inside a loop of its producer.",
    fields: (e, t) => computeAtFields(e, t, "producers"),
  },
  {
    name: "decompose_reduction",
    key: "d",
    target: "block",
    help: "Move the reduction's init statement out, above the chosen loop.",
    fields: (e, t) => {
      const b = e.node as BlockNode;
      const loops = t.ancestorLoops(e);
      return b.has_init && loops.length ? [{ kind: "choice", name: "loop", label: "above loop", options: loops.map(opt) }] : null;
    },
  },
  {
    name: "cache_read",
    target: "block",
    help: "Read a buffer through a cache in the given memory scope.",
    fields: (e) => cacheFields(e.node as BlockNode, "read"),
  },
  {
    name: "cache_write",
    target: "block",
    help: "Write a buffer through a cache in the given memory scope.",
    fields: (e) => cacheFields(e.node as BlockNode, "write"),
  },
  {
    name: "compute_inline",
    key: "i",
    target: "block",
    help: "Inline this block into its consumers (it must be a simple elementwise producer).",
    fields: (e) => (isRootBlock(e) || hasReduce(e.node as BlockNode) ? null : []),
  },
  {
    name: "reverse_compute_inline",
    target: "block",
    help: "Inline this block into its producer (it must be a simple elementwise consumer).",
    fields: (e) => (isRootBlock(e) || hasReduce(e.node as BlockNode) ? null : []),
  },
  {
    name: "annotate",
    target: "block",
    help: "Attach an annotation (key = value) to this block.",
    fields: () => annotateFields(),
  },
  {
    name: "set_scope",
    target: "block",
    help: "Keep a buffer this block writes in another memory scope (shared, local...).",
    fields: (e) => writeBufferFields(e, [{ kind: "choice", name: "storage_scope", label: "scope", options: STORAGE_SCOPES.map((s) => ({ value: s, label: s })), value: "shared" }]),
  },
  {
    name: "unsafe_set_dtype",
    target: "block",
    help: "Change the element type of a buffer this block writes (unchecked: values may lose precision).",
    fields: (e) => writeBufferFields(e, [{ kind: "choice", name: "dtype", label: "type", options: DTYPES.map((d) => ({ value: d, label: d })), value: "float16" }]),
  },
  {
    name: "rolling_buffer",
    target: "block",
    help: "Keep only the rows of this block's output that later iterations still read (a sliding window).",
    fields: (e) => writeBufferFields(e, []),
  },
  {
    name: "add_unit_loop",
    target: "block",
    help: "Wrap this block in a new loop of extent 1.",
    fields: (e) => (isRootBlock(e) ? null : []),
  },
];

const DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64"];

/** A choice of one buffer the block writes (allocated ones only: TVM refuses function parameters). */
function writeBufferFields(e: Entry, more: Field[]): Field[] | null {
  const b = e.node as BlockNode;
  if (isRootBlock(e) || !b.writes?.length) return null;
  return [{ kind: "choice", name: "buffer_index", label: "buffer", options: b.writes.map((r, i) => ({ value: String(i), label: r })) }, ...more];
}

function kindIs(e: Entry, kind: string): boolean {
  return isLoop(e.node) && e.node.loop_kind === kind;
}

function annotateFields(): Field[] {
  return [
    { kind: "text", name: "ann_key", label: "key", value: "", placeholder: "pragma_auto_unroll_max_step" },
    { kind: "text", name: "ann_val", label: "value", value: "", placeholder: "16" },
  ];
}

function computeAtFields(e: Entry, t: TreeIndex, among: "consumers" | "producers"): Field[] | null {
  if (isRootBlock(e)) return null;
  const targets = t.computeAtTargets(e, among);
  if (!targets.length) return null;
  return [
    { kind: "choice", name: "loop", label: "under loop", options: targets.map(opt) },
    { kind: "bool", name: "preserve_unit_loops", label: "preserve unit loops", value: false },
  ];
}

function cacheFields(b: BlockNode, which: "read" | "write"): Field[] | null {
  const buffers = which === "read" ? b.reads : b.writes;
  if (!buffers?.length) return null;
  return [
    {
      kind: "choice",
      name: which === "read" ? "read_buffer_index" : "write_buffer_index",
      label: "buffer",
      options: buffers.map((r, i) => ({ value: String(i), label: r })),
    },
    { kind: "choice", name: "storage_scope", label: "scope", options: STORAGE_SCOPES.map((s) => ({ value: s, label: s })), value: which === "read" ? "shared" : "local" },
  ];
}

export interface Offer {
  spec: PrimitiveSpec;
  fields: Field[];
}

/** The primitives that apply to a selection, each with its form's fields. */
export function applicable(entry: Entry | undefined, tree: TreeIndex): Offer[] {
  if (!entry || entry.node.kind === "func") return [];
  const out: Offer[] = [];
  for (const spec of PRIMITIVES) {
    if (spec.target !== entry.node.kind) continue;
    const fields = spec.fields(entry, tree);
    if (fields) out.push({ spec, fields });
  }
  return out;
}

export function offerForKey(offers: Offer[], key: string): Offer | undefined {
  return offers.find((o) => o.spec.key === key);
}

/** Values a form holds; keyed by field name. */
export type FormValues = Record<string, unknown>;

export function defaultValues(fields: Field[]): FormValues {
  const v: FormValues = {};
  for (const f of fields) {
    switch (f.kind) {
      case "factors":
        v.factors = defaultFactors(f.extent, f.parts);
        break;
      case "order":
        v.ordered_loops = f.loops.map((l) => l.value);
        break;
      case "run":
        v.loops = f.loops.slice(0, 2).map((l) => l.value);
        break;
      case "choice":
        v[f.name] = f.value ?? f.options[0]?.value;
        break;
      default:
        v[f.name] = f.value;
    }
  }
  return v;
}

/** Turn a filled form into the Session.apply call (TVM's own argument names). */
export function buildCall(spec: PrimitiveSpec, entry: Entry, values: FormValues): ApplyCall {
  const ref = entry.ref;
  const p = spec.name;
  switch (p) {
    case "split":
      return { primitive: p, args: [], kwargs: { loop: ref, factors: values.factors } };
    case "reorder":
      return { primitive: p, args: [...(values.ordered_loops as string[])], kwargs: {} };
    case "fuse":
      return { primitive: p, args: [...(values.loops as string[])], kwargs: {} };
    case "parallel":
    case "vectorize":
    case "unroll":
    case "blockize":
      return { primitive: p, args: [], kwargs: { [p === "blockize" ? "target" : "loop"]: ref } };
    case "bind":
      return { primitive: p, args: [], kwargs: { loop: ref, thread_axis: values.thread_axis } };
    case "rfactor":
      return { primitive: p, args: [], kwargs: { loop: ref, factor_axis: Number(values.factor_axis ?? 0) } };
    case "sample_perfect_tile":
      return {
        primitive: p,
        args: [],
        kwargs: { loop: ref, n: Number(values.n ?? 2), max_innermost_factor: Number(values.max_innermost_factor ?? 16) },
        then_split: values.then_split !== false,
      };
    case "annotate":
      return { primitive: p, args: [], kwargs: { block_or_loop: ref, ann_key: String(values.ann_key ?? ""), ann_val: parseLiteral(String(values.ann_val ?? "")) } };
    case "compute_at":
    case "reverse_compute_at":
      return { primitive: p, args: [], kwargs: { block: ref, loop: values.loop, preserve_unit_loops: !!values.preserve_unit_loops } };
    case "decompose_reduction":
      return spec.target === "loop"
        ? { primitive: p, args: [], kwargs: { block: values.block, loop: ref } }
        : { primitive: p, args: [], kwargs: { block: ref, loop: values.loop } };
    case "cache_read":
      return { primitive: p, args: [], kwargs: { block: ref, read_buffer_index: Number(values.read_buffer_index ?? 0), storage_scope: values.storage_scope } };
    case "cache_write":
      return { primitive: p, args: [], kwargs: { block: ref, write_buffer_index: Number(values.write_buffer_index ?? 0), storage_scope: values.storage_scope } };
    case "compute_inline":
    case "reverse_compute_inline":
    case "add_unit_loop":
      return p === "add_unit_loop" ? { primitive: p, args: [ref], kwargs: {} } : { primitive: p, args: [], kwargs: { block: ref } };
    case "set_scope":
      return { primitive: p, args: [], kwargs: { block: ref, buffer_index: Number(values.buffer_index ?? 0), storage_scope: values.storage_scope } };
    case "unsafe_set_dtype":
      return { primitive: p, args: [], kwargs: { block: ref, buffer_index: Number(values.buffer_index ?? 0), dtype: values.dtype } };
    case "rolling_buffer":
      return { primitive: p, args: [], kwargs: { block: ref, write_buffer_index: Number(values.buffer_index ?? 0) } };
    default:
      return { primitive: p, args: [ref], kwargs: { ...values } };
  }
}

/** What the user typed for an annotation value: an int, a float, a bool, or a string. */
export function parseLiteral(text: string): string | number | boolean {
  const s = text.trim();
  if (/^[-+]?\d+$/.test(s)) return Number.parseInt(s, 10);
  if (/^[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?$/.test(s)) return Number.parseFloat(s);
  if (s === "True" || s === "true") return true;
  if (s === "False" || s === "false") return false;
  return s.replace(/^["'](.*)["']$/, "$1");
}

// ---- split factors -------------------------------------------------------------------------

export function divisors(n: number): number[] {
  const small: number[] = [];
  const large: number[] = [];
  for (let d = 1; d * d <= n; d++) {
    if (n % d === 0) {
      small.push(d);
      if (d * d !== n) large.unshift(n / d);
    }
  }
  return [...small, ...large];
}

/** Default split: [None, a divisor near sqrt] so one Apply gives a sensible result. */
export function defaultFactors(extent: number | null, parts: number): Array<number | null> {
  const f: Array<number | null> = new Array(parts).fill(null);
  if (!extent) return f;
  const divs = divisors(extent).filter((d) => d > 1 && d < extent);
  if (!divs.length) return f;
  let rest = extent;
  for (let i = parts - 1; i >= 1; i--) {
    const candidates = divisors(rest).filter((d) => d > 1 && d < rest);
    if (!candidates.length) break;
    const target = Math.round(rest ** (1 / (i + 1)));
    const pick = candidates.reduce((a, b) => (Math.abs(b - target) < Math.abs(a - target) ? b : a));
    f[i] = pick;
    rest = rest / pick;
  }
  return f;
}

export type FactorCheck =
  | { ok: true; predicate: false; inferred: number | null; message: string }
  | { ok: true; predicate: true; inferred: number | null; message: string }
  | { ok: false; message: string };

/** The largest extent a loop can have: TVM's loop variables are 32-bit. */
export const MAX_EXTENT = 2 ** 31 - 1;

/** Check split factors against the loop extent, in words a student can act on. */
export function checkFactors(extent: number | null, factors: Array<number | null>): FactorCheck {
  const blanks = factors.filter((f) => f === null).length;
  if (factors.some((f) => f !== null && (!Number.isInteger(f) || f < 1))) return { ok: false, message: "Factors must be positive whole numbers." };
  if (factors.some((f) => f !== null && f > MAX_EXTENT)) return { ok: false, message: `A factor is at most ${MAX_EXTENT.toLocaleString("en-US")} (a loop's extent is a 32-bit integer).` };
  const over = extent === null ? undefined : factors.find((f) => f !== null && f > extent);
  if (over !== undefined && over !== null) return { ok: false, message: `The factor ${over} is larger than the loop (${extent} iterations): use at most ${extent}.` };
  if (blanks > 1) return { ok: false, message: "Leave at most one factor blank (it is inferred)." };
  if (factors.length < 2) return { ok: false, message: "Split into at least two loops." };
  const product = factors.reduce<number>((p, f) => p * (f ?? 1), 1);
  if (extent === null) return { ok: true, predicate: false, inferred: null, message: "The extent is symbolic; TVM checks the factors." };
  if (blanks === 1) {
    const inferred = Math.ceil(extent / product);
    if (extent % product === 0) return { ok: true, predicate: false, inferred, message: `The blank factor becomes ${inferred}.` };
    return {
      ok: true,
      predicate: true,
      inferred,
      message: `${product} does not divide ${extent}: the blank becomes ${inferred} and a predicate (T.where) guards the ${inferred * product - extent} extra iterations.`,
    };
  }
  if (product === extent) return { ok: true, predicate: false, inferred: null, message: `${factors.join(" × ")} = ${extent}.` };
  if (product > extent)
    return { ok: true, predicate: true, inferred: null, message: `${factors.join(" × ")} = ${product} > ${extent}: this adds a predicate (T.where) for the extra iterations.` };
  return { ok: false, message: `${factors.join(" × ")} = ${product} is less than the extent ${extent}: some iterations would be lost.` };
}

/** Divisors to offer as presets for the factor at `position`, given the other factors. */
export function presetsFor(extent: number | null, factors: Array<number | null>, position: number): number[] {
  if (!extent) return [];
  const others = factors.reduce<number>((p, f, i) => (i === position ? p : p * (f ?? 1)), 1);
  const room = extent % others === 0 ? extent / others : extent;
  return divisors(room);
}
