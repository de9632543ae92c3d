import { describe, expect, it } from "vitest";
import vectors from "../../tests/fixtures/name_rule.json";
import { matchNames, refOf } from "../lib/names";
import type { LoopTree } from "../lib/types";

// The same cases pytest runs against mlc_lab.model.steps.LoopTree.match.
const trees = vectors.trees as unknown as Record<string, LoopTree>;

describe("the one name rule (shared with Python)", () => {
  for (const c of vectors.cases) {
    it(`${c.tree}: ${JSON.stringify(c.text)} (${c.kind ?? "any"}): ${c.why}`, () => {
      expect(matchNames(trees[c.tree], c.text, c.kind).map(refOf)).toEqual(c.expect);
    });
  }
});
