// The one base of a widget's panels (the explorer's trace, CUDA, compiler and memory panels, and its
// History, Checks and Way panes): an element, `show` (what it shows: a step, a loop, a checks state),
// `select` (the explorer's selected loop or block) and `dispose` (its end). A view holds its panels as
// Panels and ends them all alike; each panel says once, where it makes a resource (an Rpc, an editor,
// a listener, an observer), how that resource ends.

import type { StepId } from "./types";

export abstract class Panel<Shown extends unknown[] = [step: StepId | null]> {
  abstract readonly el: HTMLElement;
  private ends: Array<() => void> = [];
  private ended = false;

  /** Show what the panel shows of `what` (by default a step; null: none yet). */
  abstract show(...what: Shown): void | Promise<void>;

  /** The explorer's selection changed (a loop or block name; null: none). A panel that marks the
   *  selected loop overrides this; the others have nothing to mark. */
  select(_name: string | null): void {}

  /** Whether the panel has been disposed (an answer that arrives later is dropped). */
  get isDisposed(): boolean {
    return this.ended;
  }

  /** Run `end` when the panel is disposed (a listener taken off, an Rpc closed, an editor destroyed). */
  protected onDispose(end: () => void): void {
    if (this.ended) end();
    else this.ends.push(end);
  }

  /** End the panel: what it registered ends, the last made first; a second call does nothing. */
  dispose(): void {
    if (this.ended) return;
    this.ended = true;
    for (const end of this.ends.splice(0).reverse()) end();
  }
}
