// Click-to-render latency of the explorer: each click's time from the click to the first frame
// painted with its new state, kept in window.__mlcLab for the end-to-end tests and benchmarks.

export interface LatencySample {
  primitive: string;
  ms: number; // click -> first frame painted with the new state
  stateMs?: number; // click -> the kernel's state update arrived
  drawMs?: number; // time spent drawing that update
  kernelMs?: number; // time the kernel spent on the request
  panels?: Record<string, number>; // drawing time per panel (ms), for the ones that were redrawn
}

declare global {
  interface Window {
    __mlcLab?: { latencies: LatencySample[] };
  }
}

/** A click (or key) waiting for its new state to be drawn: what it did and when, and the times
 * measured on the way. */
export interface PendingClick {
  t0: number;
  primitive: string;
  tState?: number;
  drawMs?: number;
  kernelMs?: number;
  panels?: Record<string, number>;
}

/** Click-to-render latency: from the click to the first frame painted with the new state. */
export function recordLatency(root: HTMLElement, pending: PendingClick): void {
  const done = () => {
    const ms = performance.now() - pending.t0;
    root.dataset.lastLatencyMs = ms.toFixed(1);
    if (typeof window !== "undefined") {
      window.__mlcLab ??= { latencies: [] };
      window.__mlcLab.latencies.push({
        primitive: pending.primitive,
        ms,
        stateMs: pending.tState === undefined ? undefined : pending.tState - pending.t0,
        drawMs: pending.drawMs,
        kernelMs: pending.kernelMs,
        panels: pending.panels,
      });
    }
  };
  // In the next frame, after style and layout of the new DOM (read offsetHeight to make sure);
  // painting is then composited off the main thread.
  if (typeof requestAnimationFrame === "function")
    requestAnimationFrame(() => {
      void root.offsetHeight;
      done();
    });
  else done();
}
