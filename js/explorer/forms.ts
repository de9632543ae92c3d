// DOM forms for the primitives. Each field kind of primitives.ts gets an editor that only offers
// valid choices (divisor presets, the loops of the nest, thread axes, buffers, scopes).

import { h } from "../lib/dom";
import { type Field, type FormValues, type Offer, checkFactors, defaultFactors, presetsFor } from "./primitives";

export interface FormHandle {
  el: HTMLElement;
  values: FormValues;
  valid(): boolean;
  focus(): void;
}

/** A primitive's form; `note` (a hint's sentence) is shown above its fields. */
export function renderForm(offer: Offer, values: FormValues, onApply: () => void, onCancel: () => void, note?: string): FormHandle {
  const checks: Array<() => boolean> = [];
  const applyBtn = h("button", { class: "mlc-btn mlc-primary mlc-apply", type: "submit" }, `Apply ${offer.spec.name}`) as HTMLButtonElement;
  const refresh = () => {
    applyBtn.disabled = !checks.every((c) => c());
  };
  const body = h("div", { class: "mlc-form-fields" });
  for (const f of offer.fields) body.append(fieldEditor(f, values, refresh, checks));
  const form = h(
    "form",
    { class: "mlc-form", dataset: { primitive: offer.spec.name } },
    note ? h("div", { class: "mlc-form-hint" }, note) : null,
    h("div", { class: "mlc-form-help" }, offer.spec.help),
    body,
    h("div", { class: "mlc-form-actions" }, applyBtn, h("button", { class: "mlc-btn mlc-cancel", type: "button", onclick: onCancel }, "Cancel")),
  ) as HTMLFormElement;
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    if (!applyBtn.disabled) onApply();
  });
  form.addEventListener("keydown", (ev) => {
    const key = (ev as KeyboardEvent).key;
    if (key === "Escape") {
      ev.preventDefault();
      ev.stopPropagation();
      onCancel();
    } else if (key === "Enter" && submitsOnEnter(ev.target)) {
      // Applied here rather than by the browser's implicit submission, which never covers a
      // <select> and which a host page may swallow (JupyterLab binds Enter in command mode).
      ev.preventDefault();
      ev.stopPropagation();
      if (!applyBtn.disabled) onApply();
    }
  });
  refresh();
  return {
    el: form,
    values,
    valid: () => checks.every((c) => c()),
    focus: () => focusFirstField(form),
  };
}

/** Focus where the student types: a split's factor (the highlighted one), else the first text or
 * number field, else the first control. Its text is selected, so a typed value replaces it. */
export function focusFirstField(form: HTMLElement): void {
  const target =
    form.querySelector<HTMLElement>(".mlc-factor.mlc-focused") ??
    form.querySelector<HTMLElement>("input[type=number], input[type=text]") ??
    form.querySelector<HTMLElement>("input:not([type=hidden]), select, .mlc-order-item, button");
  if (!target) return;
  target.focus();
  if (target instanceof HTMLInputElement) {
    try {
      target.select();
    } catch {
      // some input types cannot select their text
    }
  }
}

function fieldEditor(f: Field, values: FormValues, refresh: () => void, checks: Array<() => boolean>): HTMLElement {
  const wrap = (editor: Node, extra?: Node | null) => h("div", { class: `mlc-field mlc-field-${f.kind}`, dataset: { field: f.name } }, h("label", { class: "mlc-field-label" }, f.label), editor, extra ?? null);
  switch (f.kind) {
    case "factors":
      return wrap(factorsEditor(f.extent, values, refresh, checks));
    case "order":
      return wrap(orderEditor(f.loops.map((l) => l.value), values, refresh));
    case "run": {
      const box = h("div", { class: "mlc-run" });
      const chosen = () => (values.loops as string[]) ?? [];
      const draw = () => {
        box.replaceChildren(
          ...f.loops.map((l, i) => {
            const input = h("input", { type: "checkbox", checked: chosen().includes(l.value), disabled: i === 0 }) as HTMLInputElement;
            input.addEventListener("change", () => {
              // Fused loops must be consecutive: keep a prefix of the run.
              const n = input.checked ? i + 1 : i;
              values.loops = f.loops.slice(0, Math.max(1, n)).map((x) => x.value);
              draw();
              refresh();
            });
            return h("label", { class: "mlc-run-item" }, input, ` ${l.label}`);
          }),
        );
      };
      checks.push(() => chosen().length >= 2);
      draw();
      return wrap(box);
    }
    case "choice": {
      const select = h("select", { class: "mlc-choice", name: f.name }) as HTMLSelectElement;
      for (const o of f.options) select.append(h("option", { value: o.value, selected: String(values[f.name]) === o.value }, o.label));
      select.addEventListener("change", () => {
        values[f.name] = select.value;
        refresh();
      });
      return wrap(select);
    }
    case "int": {
      const input = h("input", { type: "number", class: "mlc-int", name: f.name, value: String(values[f.name] ?? f.value), min: f.min, max: f.max, step: "1" }) as HTMLInputElement;
      input.addEventListener("input", () => {
        values[f.name] = input.value === "" ? null : Number(input.value);
        refresh();
      });
      checks.push(() => Number.isInteger(values[f.name]) && (f.min === undefined || (values[f.name] as number) >= f.min) && (f.max === undefined || (values[f.name] as number) <= f.max));
      return wrap(input);
    }
    case "text": {
      const input = h("input", { type: "text", class: "mlc-text", name: f.name, value: String(values[f.name] ?? ""), placeholder: f.placeholder }) as HTMLInputElement;
      input.addEventListener("input", () => {
        values[f.name] = input.value;
        refresh();
      });
      checks.push(() => String(values[f.name] ?? "").trim() !== "");
      return wrap(input);
    }
    case "bool": {
      const input = h("input", { type: "checkbox", class: "mlc-bool", name: f.name, checked: !!values[f.name] }) as HTMLInputElement;
      input.addEventListener("change", () => {
        values[f.name] = input.checked;
      });
      return wrap(input);
    }
  }
}

/** The focused factor's divisors as chips, then "auto" (the factor inferred); `pick` takes the choice. */
function presetChips(extent: number | null, factors: Array<number | null>, focused: number, pick: (d: number | null) => void): HTMLElement[] {
  const chip = (d: number | null) =>
    h(
      "button",
      d === null ? { type: "button", class: "mlc-chip mlc-chip-auto", title: "infer this factor", onclick: () => pick(null) } : { type: "button", class: "mlc-chip", onclick: () => pick(d) },
      d === null ? "auto" : String(d),
    );
  return [h("span", { class: "mlc-muted" }, `divisors for factor ${focused + 1}: `), ...presetsFor(extent, factors, focused).map(chip), chip(null)];
}

function factorsEditor(extent: number | null, values: FormValues, refresh: () => void, checks: Array<() => boolean>): HTMLElement {
  const box = h("div", { class: "mlc-factors" });
  let focused = (values.factors as Array<number | null>).length - 1;
  const note = h("div", { class: "mlc-factor-note" });
  const presets = h("div", { class: "mlc-presets" });
  const inputs = h("div", { class: "mlc-factor-inputs" });
  const partsSel = h("select", { class: "mlc-parts", title: "number of loops" }) as HTMLSelectElement;
  for (const n of [2, 3, 4]) partsSel.append(h("option", { value: String(n), selected: n === (values.factors as unknown[]).length }, `${n} loops`));
  partsSel.addEventListener("change", () => {
    values.factors = defaultFactors(extent, Number(partsSel.value));
    focused = Number(partsSel.value) - 1;
    drawInputs();
    update();
  });
  const factors = () => values.factors as Array<number | null>;
  const update = () => {
    const check = checkFactors(extent, factors());
    note.textContent = check.message;
    note.className = `mlc-factor-note ${!check.ok ? "mlc-error-text" : check.predicate ? "mlc-warn-text" : "mlc-ok-text"}`;
    presets.replaceChildren(
      ...presetChips(extent, factors(), focused, (d) => {
        factors()[focused] = d;
        drawInputs();
        update();
      }),
    );
    refresh();
  };
  const drawInputs = () => {
    inputs.replaceChildren(
      ...factors().map((f, i) => {
        const input = h("input", {
          type: "number",
          min: "1",
          step: "1",
          class: `mlc-factor${i === focused ? " mlc-focused" : ""}`,
          placeholder: "auto",
          value: f === null ? "" : String(f),
          "aria-label": `factor ${i + 1}`,
        }) as HTMLInputElement;
        input.addEventListener("focus", () => {
          focused = i;
          inputs.querySelectorAll(".mlc-factor").forEach((el, j) => el.classList.toggle("mlc-focused", j === i));
          update();
        });
        input.addEventListener("input", () => {
          factors()[i] = input.value.trim() === "" ? null : Number(input.value);
          update();
        });
        return input;
      }),
    );
  };
  checks.push(() => checkFactors(extent, factors()).ok);
  drawInputs();
  update();
  box.append(h("div", { class: "mlc-factor-row" }, partsSel, inputs), presets, note);
  return box;
}

function orderEditor(initial: string[], values: FormValues, refresh: () => void): HTMLElement {
  const list = h("ol", { class: "mlc-order" });
  const order = () => values.ordered_loops as string[];
  let dragFrom = -1;
  const move = (from: number, to: number) => {
    const o = [...order()];
    if (to < 0 || to >= o.length || from === to) return;
    const [item] = o.splice(from, 1);
    o.splice(to, 0, item);
    values.ordered_loops = o;
    draw();
    refresh();
    (list.children[to] as HTMLElement | undefined)?.focus();
  };
  const draw = () => {
    list.replaceChildren(
      ...order().map((name, i) => {
        const item = h(
          "li",
          { class: `mlc-order-item${initial[i] !== name ? " mlc-moved" : ""}`, draggable: "true", tabindex: "0", dataset: { loop: name } },
          h("span", { class: "mlc-grip" }, "⠿ "),
          h("span", { class: "mlc-name" }, name),
          h("button", { type: "button", class: "mlc-mini mlc-up", title: "move out", onclick: () => move(i, i - 1) }, "↑"),
          h("button", { type: "button", class: "mlc-mini mlc-down", title: "move in", onclick: () => move(i, i + 1) }, "↓"),
        );
        item.addEventListener("dragstart", (ev) => {
          dragFrom = i;
          (ev as DragEvent).dataTransfer?.setData("text/plain", name);
        });
        item.addEventListener("dragover", (ev) => ev.preventDefault());
        item.addEventListener("drop", (ev) => {
          ev.preventDefault();
          if (dragFrom >= 0) move(dragFrom, i);
          dragFrom = -1;
        });
        item.addEventListener("keydown", (ev) => {
          const k = (ev as KeyboardEvent).key;
          if ((ev as KeyboardEvent).altKey && (k === "ArrowUp" || k === "ArrowDown")) {
            ev.preventDefault();
            ev.stopPropagation();
            move(i, k === "ArrowUp" ? i - 1 : i + 1);
          }
        });
        return item;
      }),
    );
  };
  draw();
  return h("div", {}, list, h("div", { class: "mlc-muted" }, "drag, ↑↓, or Alt+arrow on a focused loop"));
}

/** Enter in a field applies the form; buttons (and a future textarea) keep their own Enter. */
export function submitsOnEnter(target: EventTarget | null): boolean {
  const el = target as HTMLElement | null;
  if (!el || typeof el.tagName !== "string") return false;
  if (el.tagName === "SELECT") return true;
  if (el.classList?.contains("mlc-order-item")) return true; // a focused row of the reorder list
  if (el.tagName !== "INPUT") return false;
  const type = (el as HTMLInputElement).type;
  return type !== "button" && type !== "submit" && type !== "reset" && type !== "file";
}
