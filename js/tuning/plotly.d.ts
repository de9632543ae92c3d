// The prebuilt plotly.js "basic" bundle ships no types; we use a handful of its functions.
declare module "plotly.js-basic-dist-min" {
  const Plotly: {
    react(el: HTMLElement, data: unknown[], layout: Record<string, unknown>, config?: Record<string, unknown>): Promise<unknown>;
    purge(el: HTMLElement): void;
    Plots?: { resize(el: HTMLElement): void };
  };
  export default Plotly;
}
