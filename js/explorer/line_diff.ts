// A line diff for TVMScript that does not see indentation. A schedule step often moves a statement
// one nest deeper or shallower (reorder, compute_at, decompose_reduction): every line of the moved
// body changes only in its leading spaces, and a character diff then marks the whole body as
// changed. Here lines are compared with their indentation stripped, and only lines that differ in
// content form changes; inside a changed hunk, @codemirror/merge's own character diff still runs.

import { Change, diff as charDiff } from "@codemirror/merge";

/** Above this many line pairs the quadratic alignment is not worth it: use the character diff. */
const MAX_CELLS = 4_000_000;

interface Line {
  key: string; // the content without indentation
  from: number; // offset of the line's start
  to: number; // offset after its line break (or the end of the text)
}

function lines(text: string): Line[] {
  const out: Line[] = [];
  let from = 0;
  while (from <= text.length) {
    const nl = text.indexOf("\n", from);
    const end = nl < 0 ? text.length : nl;
    out.push({ key: text.slice(from, end).trim(), from, to: nl < 0 ? text.length : nl + 1 });
    if (nl < 0) break;
    from = nl + 1;
  }
  return out;
}

/** Pairs (i, j) of lines equal up to indentation, in order: a longest common subsequence. */
export function alignLines(a: string[], b: string[]): Array<[number, number]> {
  const n = a.length;
  const m = b.length;
  // Strip the common head and tail first: most of a script is unchanged.
  let head = 0;
  while (head < n && head < m && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < n - head && tail < m - head && a[n - 1 - tail] === b[m - 1 - tail]) tail++;
  const pairs: Array<[number, number]> = [];
  for (let i = 0; i < head; i++) pairs.push([i, i]);
  const an = n - head - tail;
  const bm = m - head - tail;
  if (an > 0 && bm > 0) {
    // lcs[i][j]: length of the LCS of a[head+i..] and b[head+j..]
    const w = bm + 1;
    const lcs = new Uint32Array((an + 1) * w);
    for (let i = an - 1; i >= 0; i--) {
      for (let j = bm - 1; j >= 0; j--) {
        lcs[i * w + j] = a[head + i] === b[head + j] ? lcs[(i + 1) * w + j + 1] + 1 : Math.max(lcs[(i + 1) * w + j], lcs[i * w + j + 1]);
      }
    }
    let i = 0;
    let j = 0;
    while (i < an && j < bm) {
      if (a[head + i] === b[head + j]) {
        pairs.push([head + i, head + j]);
        i++;
        j++;
      } else if (lcs[(i + 1) * w + j] >= lcs[i * w + j + 1]) i++;
      else j++;
    }
  }
  for (let k = tail; k > 0; k--) pairs.push([n - k, m - k]);
  return pairs;
}

/**
 * Changes between two texts, ignoring indentation: for @codemirror/merge's `diffConfig.override`.
 * Lines equal up to leading/trailing spaces are unchanged; between two such anchors the lines that
 * differ are one hunk, refined by the character diff.
 */
export function indentInsensitiveDiff(a: string, b: string): readonly Change[] {
  const la = lines(a);
  const lb = lines(b);
  if (la.length * lb.length > MAX_CELLS) return charDiff(a, b);
  const pairs = alignLines(
    la.map((l) => l.key),
    lb.map((l) => l.key),
  );
  const out: Change[] = [];
  let i = 0;
  let j = 0;
  const hunk = (ia: number, ib: number) => {
    // lines [i, ia) of a and [j, ib) of b differ
    if (ia === i && ib === j) return;
    const fromA = i < la.length ? la[i].from : a.length;
    const toA = ia > i ? la[ia - 1].to : fromA;
    const fromB = j < lb.length ? lb[j].from : b.length;
    const toB = ib > j ? lb[ib - 1].to : fromB;
    for (const c of charDiff(a.slice(fromA, toA), b.slice(fromB, toB))) out.push(new Change(c.fromA + fromA, c.toA + fromA, c.fromB + fromB, c.toB + fromB));
  };
  for (const [pa, pb] of pairs) {
    hunk(pa, pb);
    i = pa + 1;
    j = pb + 1;
  }
  hunk(la.length, lb.length);
  return out;
}
