// The answers the access panel keeps: a step never changes, so what one loop touched at one step is
// drawn again at once (a loop clicked a minute before was analysed again: 21 s under load). Keyed by
// the host's step (AccessHost.stepKey) and the request's parameters; the oldest go first.
import type { Footprint } from "./data";

/** Answers kept of each kind: this many, the oldest out. */
export const KEPT_ANSWERS = 24;
/** Footprints kept per step and loop (one per place of the enclosing loops). */
const PER_LOOP = 8;

export class KeptAnswers<G> {
  private footprints = new Map<string, Footprint[]>();
  private gpu = new Map<string, G>();

  /** The key of an answer: the step and the parameters (null: the host keeps none). */
  static key(step: string | null | undefined, params: object): string | null {
    return step === null || step === undefined ? null : `${step}\u0000${JSON.stringify(params)}`;
  }

  /** A kept footprint for the loop whose enclosing loops stand where `at` puts them (a loop `at` does
   *  not name: where the kept answer had it; a loop run over every thread: any). */
  footprint(key: string, at: Record<string, unknown>): Footprint | undefined {
    return this.footprints.get(key)?.find((fp) => fp.enclosing.every((lp) => (fp.swept ?? []).includes(lp.ref) || at[lp.ref] === undefined || at[lp.ref] === fp.at[lp.ref]));
  }

  keepFootprint(key: string, fp: Footprint): void {
    const others = (this.footprints.get(key) ?? []).filter((f) => JSON.stringify(f.at) !== JSON.stringify(fp.at));
    keep(this.footprints, key, [fp, ...others].slice(0, PER_LOOP));
  }

  gpuStats(key: string): G | undefined {
    return this.gpu.get(key);
  }

  keepGpuStats(key: string, stats: G): void {
    keep(this.gpu, key, stats);
  }
}

function keep<T>(map: Map<string, T>, key: string, value: T): void {
  map.delete(key);
  map.set(key, value);
  while (map.size > KEPT_ANSWERS) map.delete(map.keys().next().value as string);
}
