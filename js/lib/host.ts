// What a host page offers mlc_lab views beyond the widget itself. JupyterLab with mlc_lab's
// extension (js/labextension/src/side_panel.ts) puts its offer on the page; a view shows a control
// for an action only when the page offers it for where the view sits, and asks for it with a DOM
// event (bubbling from the view), so the views never import JupyterLab.

export const OPEN_SIDE_PANEL = "mlc-lab-open-side-panel";
const KEY = "__mlc_lab_host__";

export interface HostOffer {
  /** Whether the view in `el` can be opened again in a side panel (a notebook output, not already one). */
  canOpenSidePanel(el: HTMLElement): boolean;
}

export function setHostOffer(offer: HostOffer | null): void {
  (globalThis as Record<string, unknown>)[KEY] = offer ?? undefined;
}

export function hostOffer(): HostOffer | null {
  const offer = (globalThis as Record<string, unknown>)[KEY] as HostOffer | undefined;
  return offer && typeof offer.canOpenSidePanel === "function" ? offer : null;
}

/** Ask the host to open the view in `el` in a side panel (the event bubbles to the host's listener). */
export function requestSidePanel(el: HTMLElement): void {
  el.dispatchEvent(new CustomEvent(OPEN_SIDE_PANEL, { bubbles: true, composed: true }));
}
