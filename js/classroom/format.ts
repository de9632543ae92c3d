// Small formatting helpers shared by the class widgets.

export function ms(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return "–";
  return value >= 100 ? `${value.toFixed(0)} ms` : value >= 1 ? `${value.toFixed(2)} ms` : `${(value * 1000).toFixed(1)} µs`;
}

export function points(value: number | undefined): string {
  if (value === undefined) return "–";
  return Number.isInteger(value) ? String(value) : value.toFixed(1);
}

export function percent(value: number): string {
  return `${Math.round(value * 100)}%`;
}

export function ago(seconds: number, now = Date.now() / 1000): string {
  if (!seconds) return "";
  const d = Math.max(0, Math.round(now - seconds));
  return d < 5 ? "just now" : d < 60 ? `${d} s ago` : `${Math.round(d / 60)} min ago`;
}
