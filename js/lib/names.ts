// The one rule that finds loops and blocks by name: a port of mlc_lab.model.steps.LoopTree.match.
// Both test suites check it against tests/fixtures/name_rule.json.

import type { FuncNode, LoopTree, TreeNode } from "./types";

/** The name a view hands back to the Session: the qualified one when the node has one. */
export function refOf(node: { name: string; qualified?: string }): string {
  return node.qualified || node.name;
}

interface Walked {
  node: TreeNode;
  func: FuncNode;
}

function walk(tree: LoopTree | Record<string, never> | null | undefined): Walked[] {
  const out: Walked[] = [];
  const functions = (tree && "functions" in tree && tree.functions) || [];
  for (const func of functions) {
    const visit = (node: TreeNode) => {
      out.push({ node, func });
      for (const c of node.children ?? []) visit(c);
    };
    for (const c of func.children ?? []) visit(c);
  }
  return out;
}

function blocksUnder(node: TreeNode): Set<string> {
  const out = new Set<string>();
  const stack = [...(node.children ?? [])];
  while (stack.length) {
    const n = stack.pop()!;
    if (n.kind === "block") out.add(n.name);
    stack.push(...(n.children ?? []));
  }
  return out;
}

/**
 * Every loop (or block) that `text` names, in pre-order:
 * 1. a node whose qualified name (blocks: their name) is `text`;
 * 2. else `[func:][block/]name`: loops called `name`, in `func` if given, with `block` somewhere inside
 *    if given (blocks: called `name`, in `func`);
 * 3. an unqualified name found in several functions means the focus function's.
 */
export function matchNames(tree: LoopTree | Record<string, never> | null | undefined, text: string, kind?: string | null): TreeNode[] {
  if (!text) return [];
  const nodes = walk(tree).filter((w) => !kind || w.node.kind === kind);
  const exact = nodes.filter((w) => refOf(w.node) === text);
  if (exact.length) return exact.map((w) => w.node);
  const colon = text.lastIndexOf(":");
  const func = colon >= 0 ? text.slice(0, colon) : "";
  const rest = colon >= 0 ? text.slice(colon + 1) : text;
  const slash = rest.lastIndexOf("/");
  const block = slash >= 0 ? rest.slice(0, slash) : "";
  const name = slash >= 0 ? rest.slice(slash + 1) : rest;
  let found = nodes.filter((w) => {
    if (w.node.name !== name || (func && w.func.name !== func)) return false;
    if (w.node.kind === "block") return !block;
    return !block || blocksUnder(w.node).has(block);
  });
  if (!func && !block && new Set(found.map((w) => w.func.name)).size > 1) {
    const focus = tree && "func" in tree ? tree.func : undefined;
    const focused = found.filter((w) => w.func.name === focus);
    if (focused.length) found = focused;
  }
  return found.map((w) => w.node);
}
