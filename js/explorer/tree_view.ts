// The loop-nest panel: one row per function, loop and block, indented by depth, with coloured
// badges for the loop kind (parallel, vectorized, unrolled, thread binding) and the iteration kinds
// of blocks. Rows carry data-kind / data-name so tests and styles can find them.

import { h } from "../lib/dom";
import type { BlockNode, BufferInfo, FuncNode, LoopNode } from "../lib/types";
import type { Entry, TreeIndex } from "./tree";

const KIND_LABEL: Record<string, string> = {
  serial: "serial",
  parallel: "parallel",
  vectorized: "vectorized",
  unrolled: "unrolled",
  thread_binding: "thread",
};

const ITER_LETTER: Record<string, string> = { spatial: "S", reduce: "R", scan: "C", opaque: "O" };

export function iterLetter(kind: string): string {
  return ITER_LETTER[kind] ?? (kind.length === 1 ? kind.toUpperCase() : kind.slice(0, 1).toUpperCase());
}

function badge(text: string, cls: string, title?: string): HTMLElement {
  return h("span", { class: `mlc-badge ${cls}`, title }, text);
}

function shape(b: BufferInfo | string): string {
  if (typeof b === "string") return b;
  return `${b.name}[${(Array.isArray(b.shape) ? b.shape.join("×") : b.shape ?? "")}] ${b.dtype ?? ""}${b.scope && b.scope !== "global" ? ` @${b.scope}` : ""}`;
}

function loopRow(n: LoopNode): Array<Node | string> {
  const kind = n.loop_kind ?? "serial";
  const parts: Array<Node | string> = [
    h("span", { class: "mlc-kw" }, "for "),
    h("span", { class: "mlc-name" }, n.name),
    badge(`${n.extent}`, "mlc-extent", `extent ${n.extent}${n.min && String(n.min) !== "0" ? `, from ${n.min}` : ""}`),
  ];
  if (kind !== "serial") {
    parts.push(badge(kind === "thread_binding" ? n.thread ?? "thread" : KIND_LABEL[kind] ?? kind, `mlc-kind mlc-kind-${kind}`, `loop kind: ${kind}${n.thread ? ` (${n.thread})` : ""}`));
  }
  const anns = Object.keys(n.annotations ?? {});
  if (anns.length) parts.push(badge(`@${anns.length}`, "mlc-ann", anns.map((k) => `${k} = ${JSON.stringify(n.annotations[k])}`).join("\n")));
  return parts;
}

function blockRow(n: BlockNode): Array<Node | string> {
  const iters = (n.iter_vars ?? []).map((iv) =>
    badge(iterLetter(iv.kind), `mlc-iter mlc-iter-${iv.kind}`, `${iv.name}: ${iv.kind}, extent ${iv.extent}${iv.binding ? ` = ${iv.binding}` : ""}`),
  );
  const parts: Array<Node | string> = [h("span", { class: "mlc-kw" }, "block "), h("span", { class: "mlc-name" }, n.name), ...iters];
  if (n.has_init) parts.push(badge("init", "mlc-init", "has an init statement (a reduction)"));
  if (n.predicate) parts.push(badge("where", "mlc-where", `guarded by T.where(${n.predicate}): the loops cover more than the iteration space`));
  const anns = Object.keys(n.annotations ?? {});
  if (anns.length) parts.push(badge(`@${anns.length}`, "mlc-ann", anns.map((k) => `${k} = ${JSON.stringify(n.annotations[k])}`).join("\n")));
  return parts;
}

function funcRow(n: FuncNode): Array<Node | string> {
  // one line, cut with an ellipsis (a generated name can run to hundreds of characters); the whole name on hover
  return [h("span", { class: "mlc-kw" }, "def "), h("span", { class: "mlc-name mlc-func-name", title: n.name }, n.name)];
}

function detailLine(e: Entry): HTMLElement | null {
  const n = e.node;
  if (n.kind === "block") {
    const rw = [n.reads?.length ? `reads ${n.reads.join(", ")}` : "", n.writes?.length ? `writes ${n.writes.join(", ")}` : ""].filter(Boolean).join(" · ");
    const alloc = (n.alloc_buffers ?? []).length ? ` · allocates ${(n.alloc_buffers ?? []).map(shape).join(", ")}` : "";
    return rw || alloc ? h("div", { class: "mlc-row-detail" }, rw + alloc) : null;
  }
  if (n.kind === "func") {
    const bufs = (n.buffers ?? []).map(shape).join(", ");
    return bufs ? h("div", { class: "mlc-row-detail" }, bufs) : null;
  }
  return null;
}

export interface TreeViewState {
  selectedKey: string | null;
  involvedKeys: Set<string>;
  collapsed: Set<string>;
}

/** What a drawn row shows (its markup) and the entry its handlers act on (replaced on reuse). */
interface RowState {
  html: string;
  entry: Entry;
}
const rowStates = new WeakMap<HTMLElement, RowState>();

/**
 * Draw the rows; returns the element of the selected row (to scroll to).
 *
 * A step changes a few rows (a loop split, a kind set): rows whose markup is unchanged keep their
 * elements, so the page restyles and lays out only the rows that differ, not the whole tree.
 */
export function renderTree(
  host: HTMLElement,
  index: TreeIndex,
  state: TreeViewState,
  onSelect: (e: Entry) => void,
  onToggle: (e: Entry) => void,
  onHover?: (e: Entry | null) => void,
): HTMLElement | null {
  // The rows drawn last time, by key (a key may repeat: queue them in order).
  const old = new Map<string, HTMLElement[]>();
  for (const el of Array.from(host.children) as HTMLElement[]) {
    const k = el.dataset.key;
    if (k === undefined || !rowStates.has(el)) continue;
    const list = old.get(k);
    if (list) list.push(el);
    else old.set(k, [el]);
  }
  const rows: HTMLElement[] = [];
  let selectedEl: HTMLElement | null = null;
  let hideBelow = Number.POSITIVE_INFINITY;
  for (const e of index.entries) {
    if (e.depth > hideBelow) continue;
    hideBelow = Number.POSITIVE_INFINITY;
    const collapsed = state.collapsed.has(e.key);
    if (collapsed) hideBelow = e.depth;
    const fresh = drawRow(e, state, collapsed, onSelect, onToggle, onHover);
    const html = fresh.outerHTML;
    const candidates = old.get(e.key);
    const prev = candidates?.[0];
    let row = fresh;
    if (prev && rowStates.get(prev)!.html === html) {
      candidates!.shift();
      rowStates.get(prev)!.entry = e;
      row = prev;
    } else rowStates.set(fresh, { html, entry: e });
    if (e.key === state.selectedKey) selectedEl = row;
    rows.push(row);
  }
  // Put the rows in order, moving or inserting only where they differ from what is there.
  let cursor: ChildNode | null = host.firstChild;
  for (const row of rows) {
    if (row === cursor) cursor = cursor.nextSibling;
    else host.insertBefore(row, cursor);
  }
  while (cursor) {
    const next: ChildNode | null = cursor.nextSibling;
    cursor.remove();
    cursor = next;
  }
  return selectedEl;
}

function drawRow(
  e: Entry,
  state: TreeViewState,
  collapsed: boolean,
  onSelect: (e: Entry) => void,
  onToggle: (e: Entry) => void,
  onHover?: (e: Entry | null) => void,
): HTMLElement {
  const n = e.node;
  const hasKids = (n.children ?? []).length > 0;
  // Handlers act on the entry of the latest draw (a reused row outlives the index it was drawn from).
  let row: HTMLElement;
  const current = () => rowStates.get(row)?.entry ?? e;
  const twisty = h(
    "span",
    {
      class: `mlc-twisty${hasKids ? "" : " mlc-twisty-leaf"}`,
      onclick: (ev: Event) => {
        ev.stopPropagation();
        if (hasKids) onToggle(current());
      },
    },
    hasKids ? (collapsed ? "▸" : "▾") : "",
  );
  const content = n.kind === "loop" ? loopRow(n) : n.kind === "block" ? blockRow(n) : funcRow(n);
  const classes = ["mlc-row", `mlc-row-${n.kind}`];
  if (e.key === state.selectedKey) classes.push("mlc-selected");
  if (state.involvedKeys.has(e.key)) classes.push("mlc-involved");
  row = h(
    "div",
    {
      class: classes.join(" "),
      style: { paddingLeft: `${4 + e.depth * 14}px` },
      dataset: { key: e.key, kind: n.kind, name: e.ref },
      title: "line" in n && n.line ? `lines ${n.line}–${n.end_line ?? n.line}` : undefined,
      onclick: () => onSelect(current()),
      onmouseenter: onHover ? () => onHover(current()) : undefined,
      onmouseleave: onHover ? () => onHover(null) : undefined,
    },
    h("div", { class: "mlc-row-main" }, twisty, ...content),
    detailLine(e),
  );
  return row;
}
