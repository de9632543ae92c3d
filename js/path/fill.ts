// A hint as a filled-in form: the step of the way (a PathStep: TVM's primitive and its arguments, loops
// and blocks named as in the script) becomes the explorer's own form for that primitive, on the loop or
// block it acts on, with every field set from the step. The student presses Apply: the call goes as a
// click's does. A step the explorer has no form for (storage_align, transform_layout, a cache_read for
// some consumers only) gets a form of its call alone. Pure: no DOM, so vitest checks it directly.

import { PATH_VARIADIC, type PathStep } from "../lib/model";
import { type ApplyCall, type Field, type FormValues, type Offer, PRIMITIVES, type PrimitiveSpec, buildCall, defaultValues } from "../explorer/primitives";
import type { Entry, TreeIndex } from "../explorer/tree";

/** The arguments Session.apply takes for a step of the way (PathStep.call in mlc_lab/model/path.py). */
export function stepCall(step: PathStep): ApplyCall {
  const kwargs: Record<string, unknown> = { ...step.arguments };
  const loops = (PATH_VARIADIC as Record<string, string>)[step.primitive];
  let args: unknown[] = [];
  if (loops) {
    args = Array.isArray(kwargs[loops]) ? [...(kwargs[loops] as unknown[])] : [];
    delete kwargs[loops];
  }
  return { primitive: step.primitive, args, kwargs };
}

export interface HintForm {
  /** The primitive's form (its own fields), or a form of the call alone. */
  offer: Offer;
  /** The loop or block to select first (the form acts on it); null when none is named. */
  entry: Entry | null;
  values: FormValues;
  /** The hint's own call: what Apply sends while the form holds what the hint filled in. */
  call: ApplyCall;
  /** Whether `offer` is the explorer's own form for the primitive (else a form of the call alone). */
  own: boolean;
  /** The values as filled in (JSON): a form the student changed sends what it then holds. */
  filled: string;
}

// The arguments that name the loop or block a primitive acts on, by what the explorer's form targets.
const SUBJECT: Record<"loop" | "block", string[]> = { loop: ["loop", "target", "block_or_loop"], block: ["block", "block_or_loop"] };
// Arguments whose values are loops or blocks (names as printed: "j_0", "Y/j").
const NAMED = new Set(["loop", "block", "target", "block_or_loop"]);

/** The form a hint opens: the explorer's form for the step's primitive, filled in, when that form
 * makes exactly the step's call; else a form of the call alone. */
export function hintForm(step: PathStep, tree: TreeIndex): HintForm {
  const call = stepCall(step);
  for (const spec of PRIMITIVES) {
    if (spec.name !== step.primitive) continue;
    const entry = subjectOf(spec, call, tree);
    const fields = entry ? spec.fields(entry, tree) : null;
    if (!entry || !fields) continue;
    const filled = fill(fields, call, tree);
    if (filled && sameCall(buildCall(spec, entry, filled.values), call, tree))
      return { offer: { spec, fields: filled.fields }, entry, values: filled.values, call, own: true, filled: JSON.stringify(filled.values) };
  }
  return callForm(step, call, tree);
}

function subjectOf(spec: PrimitiveSpec, call: ApplyCall, tree: TreeIndex): Entry | undefined {
  const named = SUBJECT[spec.target].map((k) => call.kwargs[k]).find((v) => typeof v === "string") as string | undefined;
  const name = named ?? (spec.target === "loop" && typeof call.args[0] === "string" ? (call.args[0] as string) : undefined);
  if (!name) return undefined;
  const entry = tree.findName(name);
  return entry && entry.node.kind === spec.target ? entry : undefined;
}

/** A name as the form holds it (the loop's or block's ref), or the name as given when it names none. */
const refFor = (tree: TreeIndex, name: unknown): string => (typeof name === "string" ? (tree.findName(name)?.ref ?? name) : String(name));

function fill(fields: Field[], call: ApplyCall, tree: TreeIndex): { fields: Field[]; values: FormValues } | null {
  const values = defaultValues(fields);
  const out: Field[] = [];
  const given = (name: string) => call.kwargs[name];
  for (const f of fields) {
    switch (f.kind) {
      case "factors": {
        const factors = given("factors");
        if (!Array.isArray(factors)) return null;
        // a factor past the loop (TVM's own way has it) is refused by the split form: the call's form
        if (f.extent !== null && factors.some((x) => typeof x === "number" && x > (f.extent as number))) return null;
        values.factors = factors.map((x) => (x === null || x === undefined ? null : Number(x)));
        break;
      }
      case "order": {
        // reorder(k_0, k_1, j_1) permutes those loops among their own places in the chain; the form
        // holds the whole chain, in the order that makes the same nest.
        const chain = f.loops.map((o) => o.value);
        const hinted = call.args.map((a) => refFor(tree, a));
        const places = hinted.map((r) => chain.indexOf(r)).sort((a, b) => a - b);
        if (places.some((p) => p < 0) || new Set(places).size !== hinted.length) return null;
        const order = [...chain];
        places.forEach((p, i) => (order[p] = hinted[i]));
        values.ordered_loops = order;
        break;
      }
      case "run": {
        const hinted = call.args.map((a) => refFor(tree, a));
        const run = f.loops.map((o) => o.value);
        if (hinted.length < 2 || hinted.some((r, i) => run[i] !== r)) return null;
        values.loops = hinted;
        break;
      }
      case "choice": {
        const v = given(f.name);
        if (v === undefined || v === null) break;
        const value = NAMED.has(f.name) ? refFor(tree, v) : String(v);
        // the hint's value is one TVM accepted; a choice the form's own reading left out is added
        const options = f.options.some((o) => o.value === value) ? f.options : [...f.options, { value, label: value }];
        out.push({ ...f, options });
        values[f.name] = value;
        continue;
      }
      case "int":
        if (given(f.name) !== undefined) values[f.name] = Number(given(f.name));
        break;
      case "text":
        if (given(f.name) !== undefined) values[f.name] = typeof given(f.name) === "string" ? given(f.name) : JSON.stringify(given(f.name));
        break;
      case "bool":
        if (given(f.name) !== undefined) values[f.name] = !!given(f.name);
        break;
    }
    out.push(f);
  }
  return { fields: out, values };
}

const isDefault = (v: unknown) => v === undefined || v === null || v === false || v === 0;

function normal(tree: TreeIndex, key: string, v: unknown): unknown {
  if (NAMED.has(key)) return refFor(tree, v);
  if (Array.isArray(v)) return v.map((x) => (typeof x === "string" ? refFor(tree, x) : x));
  return v;
}

/** Whether the form's call is the step's: the same primitive, loops and blocks, and arguments (an
 * argument only one side names is equal when it holds TVM's default: False, None, 0). A reorder is
 * the same when it makes the same nest (its order was built that way in `fill`). */
export function sameCall(form: ApplyCall, step: ApplyCall, tree: TreeIndex): boolean {
  if (form.primitive !== step.primitive) return false;
  if (form.primitive === "reorder") return true;
  const args = (c: ApplyCall) => JSON.stringify(c.args.map((a) => refFor(tree, a)));
  if (args(form) !== args(step)) return false;
  for (const key of new Set([...Object.keys(form.kwargs), ...Object.keys(step.kwargs)])) {
    const a = form.kwargs[key];
    const b = step.kwargs[key];
    if (!(key in form.kwargs) || !(key in step.kwargs)) {
      if (isDefault(a) && isDefault(b)) continue;
      return false;
    }
    if (JSON.stringify(normal(tree, key, a)) !== JSON.stringify(normal(tree, key, b))) return false;
  }
  return !form.then_split;
}

function callForm(step: PathStep, call: ApplyCall, tree: TreeIndex): HintForm {
  const subject = [...NAMED].map((k) => call.kwargs[k]).find((v) => typeof v === "string") ?? call.args[0];
  const entry = typeof subject === "string" ? (tree.findName(subject) ?? null) : null;
  const spec: PrimitiveSpec = {
    name: step.primitive,
    target: entry?.node.kind === "block" ? "block" : "loop",
    help:
      step.primitive === "split"
        ? `The target splits this loop by a factor larger than the loop (TVM then adds a predicate); the split form refuses that to a hand-typed split, so Apply makes it as the hint gives it, ${step.label}.`
        : `The explorer has no form for this call: Apply makes it as the hint gives it, ${step.label}.`,
    fields: () => [],
  };
  return { offer: { spec, fields: [] }, entry, values: {}, call, own: false, filled: "{}" };
}

/** What Apply sends from a hint's form: the hint's own call (a reorder names the loops the hint
 * names, and the history labels the step as the hint did), or, once the student changed the form,
 * the call the form makes of what it holds. */
export function hintedCall(form: HintForm, values: FormValues): ApplyCall {
  return form.own && form.entry && JSON.stringify(values) !== form.filled ? buildCall(form.offer.spec, form.entry, values) : form.call;
}
