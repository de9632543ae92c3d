// The explorer's size and place on the page: a grip to drag its height, and a "full window" mode
// that lifts it out of the notebook cell. The panes themselves reflow with the explorer's width
// (container queries in explorer.css): three columns when the code keeps 80 columns beside the
// side panes, otherwise the code spans the width with the panes docked below it.

import { h, keepFocus } from "../lib/dom";
import { hostOffer, requestSidePanel } from "../lib/host";
import { button } from "./toolbar";

const MIN_HEIGHT = 360;
const WINDOW_CHROME_PX = 160; // JupyterLab's menu, tabs, notebook toolbar and status bar

export class ExplorerLayout {
  readonly maximizeBtn: HTMLButtonElement;
  readonly grip: HTMLElement;
  private userHeight: number | null = null; // px, set by dragging the grip (without the memory panel)
  private placeholder: HTMLElement | null = null;
  private onWindowKey = (ev: KeyboardEvent) => {
    if (ev.key === "Escape" && this.maximized && !ev.defaultPrevented) this.setMaximized(false);
  };

  constructor(
    private root: HTMLElement,
    private extraHeight: () => number, // px the open memory panel adds below the body
    private relayout: () => void,
  ) {
    this.maximizeBtn = h(
      "button",
      { class: "mlc-btn mlc-maximize", title: "Full window: the explorer over the whole page (Esc or click again to go back)", onmousedown: keepFocus, onclick: () => this.setMaximized(!this.maximized) },
      "⤢",
    ) as HTMLButtonElement;
    this.grip = h("div", { class: "mlc-resize-grip", title: "drag to change the height", role: "separator", "aria-orientation": "horizontal" });
    this.grip.addEventListener("pointerdown", (ev) => this.startDrag(ev));
  }

  get maximized(): boolean {
    return this.placeholder !== null;
  }

  /**
   * The explorer's height without the memory panel: dragged by the user, else the trait, but no
   * taller than the window leaves for a notebook output (a laptop's 720 px window has about 560).
   */
  baseHeight(traitHeight: string): string {
    if (this.userHeight !== null) return `${this.userHeight}px`;
    return `min(${traitHeight}, max(${MIN_HEIGHT}px, calc(100vh - ${WINDOW_CHROME_PX}px)))`;
  }

  /**
   * Full window: the explorer moves to the end of <body> (a notebook cell contains fixed-position
   * children, so it cannot simply be made `position: fixed` where it is) and comes back to its
   * place, marked by a placeholder, when toggled off.
   */
  setMaximized(on: boolean): void {
    if (on === this.maximized || typeof document === "undefined") return;
    if (on) {
      const parent = this.root.parentElement;
      if (!parent) return;
      this.placeholder = h("div", { class: "mlc-explorer-placeholder" }, "The explorer is open in the full window. ", h("button", { class: "mlc-btn", onclick: () => this.setMaximized(false) }, "Bring it back"));
      this.placeholder.style.height = `${this.root.offsetHeight}px`;
      parent.replaceChild(this.placeholder, this.root);
      // Inside a shadow root (marimo, MyST) it stays in that root, where its stylesheets and its
      // editors' are (lib/styles.ts); `position: fixed` still covers the window from there.
      const home = parent.getRootNode();
      if (home instanceof ShadowRoot) home.append(this.root);
      else document.body.append(this.root);
      this.root.classList.add("mlc-maximized");
      document.addEventListener("keydown", this.onWindowKey);
    } else {
      const ph = this.placeholder!;
      this.placeholder = null;
      this.root.classList.remove("mlc-maximized");
      document.removeEventListener("keydown", this.onWindowKey);
      if (ph.parentElement) ph.parentElement.replaceChild(this.root, ph);
      else this.root.remove();
    }
    this.maximizeBtn.textContent = on ? "⤡" : "⤢";
    this.maximizeBtn.classList.toggle("mlc-active", on);
    this.root.focus({ preventScroll: true });
    this.relayout();
  }

  private startDrag(ev: PointerEvent): void {
    if (this.maximized) return;
    ev.preventDefault();
    const startY = ev.clientY;
    const start = this.root.getBoundingClientRect().height;
    this.grip.setPointerCapture?.(ev.pointerId);
    const move = (e: PointerEvent) => {
      const total = Math.max(MIN_HEIGHT + this.extraHeight(), start + e.clientY - startY);
      this.userHeight = Math.round(total - this.extraHeight());
      this.relayout();
    };
    const up = () => {
      this.grip.removeEventListener("pointermove", move);
      this.grip.removeEventListener("pointerup", up);
      this.grip.removeEventListener("pointercancel", up);
    };
    this.grip.addEventListener("pointermove", move);
    this.grip.addEventListener("pointerup", up);
    this.grip.addEventListener("pointercancel", up);
  }

  dispose(): void {
    document.removeEventListener("keydown", this.onWindowKey);
    this.placeholder?.remove();
    this.placeholder = null;
  }
}

/** In JupyterLab with mlc_lab's extension: a button that opens a second view of this explorer in the
 *  right split, shown only where the host offers one (asked again when the pointer comes in). */
export function sidePanelButton(root: HTMLElement): HTMLButtonElement {
  const side = button("⇥", "Open in a side panel: a second view of this explorer beside the notebook", "mlc-side-panel", () => requestSidePanel(root));
  side.hidden = true;
  const offerSide = () => {
    side.hidden = !(root.isConnected && hostOffer()?.canOpenSidePanel(root));
  };
  queueMicrotask(offerSide);
  setTimeout(offerSide, 0); // the output is attached to the page after render returns
  root.addEventListener("pointerenter", offerSide);
  return side;
}
