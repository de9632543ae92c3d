// Python highlighting for the explorer's CodeMirror panes, with the syntax trees of recent texts
// kept. The Lezer Python grammar reuses nothing of the previous tree when a text is edited (its
// indentation tracking defeats incremental parsing: a parse given the old tree of the very same
// text costs as much as a fresh one), so every step re-parsed the whole script and trace. A click
// mostly moves between texts already shown (undo, redo, goto, a knob moved back), so the tree of
// each recent text is kept and handed back at once; only a text never seen is parsed.

import { Language, LanguageSupport } from "@codemirror/language";
import { python, pythonLanguage } from "@codemirror/lang-python";
import type { Input, Parser, PartialParse, Tree, TreeFragment } from "@lezer/common";

/** How many texts' trees one parser keeps (a script's tree is a few tens of kB). */
const KEEP = 24;

/** Counters, for tests: how many parses were started and how many were answered from the cache. */
export interface ParseCounts {
  parsed: number;
  reused: number;
}

/** A parser that answers a whole text it has parsed before with the tree it built then. */
export function cachingParser(inner: Parser, keep = KEEP, counts?: ParseCounts): Parser {
  const trees = new Map<string, Tree>(); // in order of use: the first is the oldest
  const remember = (text: string, tree: Tree) => {
    trees.delete(text);
    trees.set(text, tree);
    while (trees.size > keep) trees.delete(trees.keys().next().value as string);
  };
  const createParse = (input: Input, fragments: readonly TreeFragment[], ranges: readonly { from: number; to: number }[]): PartialParse => {
    const whole = ranges.length === 1 && ranges[0].from === 0 && ranges[0].to === input.length;
    const text = whole ? input.read(0, input.length) : null;
    const known = text !== null ? trees.get(text) : undefined;
    if (known && text !== null) {
      remember(text, known);
      if (counts) counts.reused++;
      return { advance: () => known, parsedPos: input.length, stopAt() {}, stoppedAt: null };
    }
    if (counts) counts.parsed++;
    const parse = inner.createParse(input, fragments, ranges);
    return {
      advance() {
        const tree = parse.advance();
        // A parse stopped early (CodeMirror stops at the end of the viewport) is not the whole tree.
        if (tree && text !== null && parse.stoppedAt === null) remember(text, tree);
        return tree;
      },
      get parsedPos() {
        return parse.parsedPos;
      },
      stopAt(pos: number) {
        parse.stopAt(pos);
      },
      get stoppedAt() {
        return parse.stoppedAt;
      },
    };
  };
  const normalize = (input: Input | string, fragments?: readonly TreeFragment[], ranges?: readonly { from: number; to: number }[]) => {
    const inp: Input = typeof input === "string" ? stringInput(input) : input;
    return createParse(inp, fragments ?? [], ranges?.length ? ranges : [{ from: 0, to: inp.length }]);
  };
  return {
    createParse,
    startParse: normalize,
    parse(input: Input | string, fragments?: readonly TreeFragment[], ranges?: readonly { from: number; to: number }[]) {
      const p = normalize(input, fragments, ranges);
      for (;;) {
        const done = p.advance();
        if (done) return done;
      }
    },
  } as Parser;
}

function stringInput(s: string): Input {
  return { length: s.length, chunk: (from: number) => s.slice(from), lineChunks: false, read: (from: number, to: number) => s.slice(from, to) };
}

/** Python language support whose parser keeps the trees of recent texts (one cache per pane). */
export function cachedPython(counts?: ParseCounts): LanguageSupport {
  const lang = new Language(pythonLanguage.data, cachingParser(pythonLanguage.parser, KEEP, counts), [], "python");
  return new LanguageSupport(lang, python().support);
}
