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

/** The load a timing was taken under, and a warning when the machine was busy (its figure is noise as much as schedule). */
export function loadNote(p: { load?: number | null; quiet?: boolean | null }): string {
  const load = p.load === null || p.load === undefined ? "" : `load ${p.load.toFixed(1)}`;
  return p.quiet === false ? `⚠ busy machine${load ? `, ${load}` : ""}` : load;
}
