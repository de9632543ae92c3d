// Pure helpers over the loop tree (no DOM): indexing, lookup, navigation and the loop sets that the
// primitive forms offer (a reorderable chain, fusable runs, compute_at targets).

import { matchNames, refOf } from "../lib/names";
import type { AnyNode, BlockNode, FuncNode, LoopNode, LoopTree, Selection, TreeNode } from "../lib/types";

export interface Entry {
  node: AnyNode;
  key: string; // unique in the tree: "loop:Y/j_0", "block:Y", "func:mm_relu"
  ref: string; // the name to hand to Session.apply (qualified when available)
  depth: number;
  parent: Entry | null;
  func: FuncNode;
  index: number; // pre-order position
}

export { refOf };

export function keyOf(node: AnyNode): string {
  return `${node.kind}:${refOf(node)}`;
}

export class TreeIndex {
  readonly entries: Entry[] = [];
  private byKey = new Map<string, Entry>();
  private byNode = new Map<AnyNode, Entry>();

  constructor(readonly tree: LoopTree | Record<string, never> | null | undefined) {
    const functions = (tree && "functions" in tree && tree.functions) || [];
    for (const fn of functions) this.visit(fn, 0, null, fn);
  }

  private visit(node: AnyNode, depth: number, parent: Entry | null, func: FuncNode): void {
    const entry: Entry = { node, key: keyOf(node), ref: refOf(node), depth, parent, func, index: this.entries.length };
    this.entries.push(entry);
    if (!this.byKey.has(entry.key)) this.byKey.set(entry.key, entry);
    this.byNode.set(node, entry);
    for (const child of node.children ?? []) this.visit(child, depth + 1, entry, func);
  }

  get size(): number {
    return this.entries.length;
  }

  entryOf(node: AnyNode): Entry | undefined {
    return this.byNode.get(node);
  }

  /** Find a node by selection, or by a name as the Session would print it ("j_0", "Y/j_0"). */
  find(sel: Selection | { kind?: string; name: string } | null | undefined): Entry | undefined {
    if (!sel || !sel.name) return undefined;
    if (sel.kind) {
      const exact = this.byKey.get(`${sel.kind}:${sel.name}`);
      if (exact) return exact;
    }
    return this.findName(sel.name, sel.kind);
  }

  /** The first node `name` names by the Session's rule (lib/names.ts); functions by their name. */
  findName(name: string, kind?: string): Entry | undefined {
    if (kind === "func") return this.entries.find((e) => e.node.kind === "func" && e.node.name === name);
    const [first] = matchNames(this.tree, name, kind);
    return first ? this.byNode.get(first) : undefined;
  }

  /** Every loop and block that one of `names` names (an ambiguous name: all its candidates). */
  findAll(names: readonly string[] | undefined): Entry[] {
    if (!names?.length) return [];
    const out: Entry[] = [];
    for (const name of names) {
      for (const node of matchNames(this.tree, name)) {
        const e = this.byNode.get(node);
        if (e) out.push(e);
      }
    }
    return out;
  }

  /** The deepest loop or block whose lines include `line` (1-based), e.g. a click in the code. */
  atLine(line: number): Entry | undefined {
    let best: Entry | undefined;
    for (const e of this.entries) {
      const n = e.node;
      if (n.kind === "func" || !n.line) continue;
      const end = n.end_line ?? n.line;
      if (line >= n.line && line <= end && (!best || e.depth > best.depth)) best = e;
    }
    return best;
  }

  ancestors(entry: Entry): Entry[] {
    const out: Entry[] = [];
    for (let p = entry.parent; p; p = p.parent) out.push(p);
    return out;
  }

  ancestorLoops(entry: Entry): Entry[] {
    return this.ancestors(entry).filter((e) => e.node.kind === "loop").reverse(); // outermost first
  }

  descendants(entry: Entry): Entry[] {
    const out: Entry[] = [];
    for (let i = entry.index + 1; i < this.entries.length && this.entries[i].depth > entry.depth; i++) out.push(this.entries[i]);
    return out;
  }

  blocksUnder(entry: Entry): Entry[] {
    return this.descendants(entry).filter((e) => e.node.kind === "block");
  }

  /**
   * The loops that `reorder` may permute together with `entry`: the maximal chain of perfectly
   * nested loops through it (each loop's only child is the next loop). Outermost first.
   */
  reorderChain(entry: Entry): Entry[] {
    if (entry.node.kind !== "loop") return [];
    let top = entry;
    while (top.parent && top.parent.node.kind === "loop" && onlyChild(top.parent.node) === top.node) top = top.parent;
    const chain: Entry[] = [top];
    let cur = top;
    for (;;) {
      const only = onlyChild(cur.node);
      if (!only || only.kind !== "loop") break;
      const next = this.entryOf(only);
      if (!next) break;
      chain.push(next);
      cur = next;
    }
    return chain;
  }

  /** Loops that can be fused starting at `entry`: it and each perfectly nested loop below it. */
  fuseRun(entry: Entry): Entry[] {
    if (entry.node.kind !== "loop") return [];
    const run = [entry];
    let cur = entry;
    for (;;) {
      const only = onlyChild(cur.node);
      if (!only || only.kind !== "loop") break;
      const next = this.entryOf(only)!;
      run.push(next);
      cur = next;
    }
    return run;
  }

  /** Loops a block may be moved under with compute_at / reverse_compute_at (outside its own nest). */
  /** Where a block can go: compute_at puts a producer under a loop of a block that reads what it
   * writes (its consumers), reverse_compute_at a consumer under a loop of a block that writes what it
   * reads (its producers). Loops of the block's own nest never count. Without the blocks' accesses
   * (an older tree) every other loop of the function is offered. */
  computeAtTargets(block: Entry, among: "consumers" | "producers" | "any" = "any"): Entry[] {
    const own = new Set(this.ancestors(block));
    const node = block.node as BlockNode;
    let related: Set<Entry> | null = null;
    if (among !== "any" && node.reads && node.writes) {
      const mine = new Set((among === "consumers" ? node.writes : node.reads).map(bufferOf));
      related = new Set();
      for (const e of this.entries) {
        if (e === block || e.func !== block.func || !isBlock(e.node)) continue;
        const theirs = among === "consumers" ? e.node.reads : e.node.writes;
        if ((theirs ?? []).some((r) => mine.has(bufferOf(r)))) for (const a of this.ancestors(e)) related.add(a);
      }
    }
    return this.entries.filter((e) => e.node.kind === "loop" && e.func === block.func && !own.has(e) && (!related || related.has(e)));
  }

  /** Visible order for keyboard navigation. */
  next(entry: Entry | undefined, delta: 1 | -1): Entry | undefined {
    const list = this.entries;
    if (!list.length) return undefined;
    if (!entry) return delta > 0 ? list[0] : list[list.length - 1];
    const i = Math.min(list.length - 1, Math.max(0, entry.index + delta));
    return list[i];
  }

  firstChild(entry: Entry): Entry | undefined {
    const child = entry.node.children?.[0];
    return child ? this.entryOf(child) : undefined;
  }
}

/** "Y[vi, vj]" -> "Y". */
function bufferOf(region: string): string {
  const at = region.indexOf("[");
  return (at < 0 ? region : region.slice(0, at)).trim();
}

function onlyChild(node: AnyNode): TreeNode | undefined {
  const kids = node.children ?? [];
  return kids.length === 1 ? kids[0] : undefined;
}

export function isLoop(node: AnyNode | undefined): node is LoopNode {
  return !!node && node.kind === "loop";
}

export function isBlock(node: AnyNode | undefined): node is BlockNode {
  return !!node && node.kind === "block";
}

/** Integer extent, or null when symbolic. */
export function intExtent(node: LoopNode): number | null {
  const n = typeof node.extent === "number" ? node.extent : Number(node.extent);
  return Number.isInteger(n) && n > 0 ? n : null;
}

/** The lines a node spans, 1-based inclusive. */
export function lineSpan(node: AnyNode): [number, number] | null {
  if (!("line" in node) || !node.line) return null;
  return [node.line, node.end_line ?? node.line];
}
