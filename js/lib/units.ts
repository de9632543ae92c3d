// One rule for showing a latency, the explorer's, the tuning dashboard's and the CLI's
// (mlc_lab/_units.py format_latency): three significant digits in the unit that fits (s, ms, µs,
// ns), "—" when there is no figure. tests/fixtures/latency_format.json holds both languages to it.

const UNITS: Array<[number, string]> = [
  [1, "s"],
  [1e-3, "ms"],
  [1e-6, "µs"],
  [1e-9, "ns"],
];

/** A figure with three significant digits: "263", "26.3", "2.63". */
export function threeDigits(v: number): string {
  return Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(2);
}

/** "2.63 ms", "41.2 µs", "1.20 s". */
export function formatLatency(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "—";
  const [scale, unit] = UNITS.find(([s]) => Math.abs(seconds) >= s) ?? UNITS[UNITS.length - 1];
  return `${threeDigits(seconds / scale)} ${unit}`;
}
