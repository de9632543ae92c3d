import { describe, expect, it } from "vitest";
import fixture from "../../tests/fixtures/latency_format.json";
import { formatLatency as explorerFormat } from "../measure/measure";
import { formatLatency } from "../lib/units";
import { formatLatency as dashboardFormat } from "../tuning/data";

// The same cases pytest runs against mlc_lab._units.format_latency (the CLI's lines).
describe("one rule for a latency (shared with Python)", () => {
  for (const [seconds, text] of fixture.cases as Array<[number | null, string]>) {
    it(`${seconds} s reads ${text}`, () => {
      expect(formatLatency(seconds)).toBe(text);
    });
  }
  it("is the rule of the explorer and of the tuning dashboard", () => {
    expect(explorerFormat).toBe(formatLatency);
    expect(dashboardFormat).toBe(formatLatency);
  });
});
