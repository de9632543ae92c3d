import { describe, expect, it, vi } from "vitest";
import { diffBases, historyRows } from "../explorer/history";
import { keyAction } from "../explorer/keys";
import { REQUESTS } from "../lib/model";
import { Rpc, RpcFailure, bufferText, requestTimeoutMs } from "../lib/rpc";
import { fakeModel } from "./fixtures";

describe("keyboard shortcuts", () => {
  it("maps keys to actions", () => {
    expect(keyAction({ key: "z", ctrlKey: true })).toEqual({ type: "undo" });
    expect(keyAction({ key: "z", metaKey: true })).toEqual({ type: "undo" });
    expect(keyAction({ key: "Z", ctrlKey: true, shiftKey: true })).toEqual({ type: "redo" });
    expect(keyAction({ key: "y", ctrlKey: true })).toEqual({ type: "redo" });
    expect(keyAction({ key: "ArrowDown" })).toEqual({ type: "move", delta: 1 });
    expect(keyAction({ key: "ArrowUp" })).toEqual({ type: "move", delta: -1 });
    expect(keyAction({ key: "ArrowLeft" })).toEqual({ type: "parent" });
    expect(keyAction({ key: "ArrowRight" })).toEqual({ type: "child" });
    expect(keyAction({ key: "s" })).toEqual({ type: "primitive", key: "s" });
    expect(keyAction({ key: "r" })).toEqual({ type: "primitive", key: "r" });
    expect(keyAction({ key: "Escape" })).toEqual({ type: "escape" });
    expect(keyAction({ key: "?" , shiftKey: true})).toEqual({ type: "help" });
  });

  it("leaves other chords to the browser", () => {
    expect(keyAction({ key: "c", ctrlKey: true })).toBeNull();
    expect(keyAction({ key: "s", altKey: true })).toBeNull();
    expect(keyAction({ key: "x" })).toBeNull();
  });
});

describe("history rows", () => {
  const steps = [
    { id: 0, parent: null, children: [1, 3], primitive: "", label: "original program" },
    { id: 1, parent: 0, children: [2], primitive: "split", label: "split(j)" },
    { id: 2, parent: 1, children: [], primitive: "reorder", label: "reorder" },
    { id: 3, parent: 0, children: [], primitive: "parallel", label: "parallel(i)" },
  ];
  const failure = { id: 1, parent: 2, primitive: "vectorize", label: "vectorize(k)", summary: "k is a reduction loop", detail: "", involved: ["k"] };

  it("lists a linear history flat, branches indented, failures under their step", () => {
    const rows = historyRows(steps, [failure], 2);
    expect(rows.map((r) => [r.kind, r.id, r.depth, r.current, r.onPath, r.branch])).toEqual([
      ["step", 0, 0, false, true, false],
      ["step", 1, 0, false, true, false],
      ["step", 2, 0, true, true, false],
      ["failure", 1, 1, false, false, false],
      ["step", 3, 1, false, false, true],
    ]);
  });

  it("offers the parent first as a diff base", () => {
    expect(diffBases(steps, 2).map((s) => s.id)).toEqual([1, 0, 3]);
    expect(diffBases(steps, 0).map((s) => s.id)).toEqual([1, 2, 3]);
  });
});

describe("rpc", () => {
  it("correlates responses by id and decodes text buffers", async () => {
    const model = fakeModel();
    const rpc = new Rpc(model as any);
    const p = rpc.request("script_at", { step: 1 });
    expect(model.requests()).toEqual([expect.objectContaining({ method: "script_at", params: { step: 1 } })]);
    model.emit({ kind: "mlc-response", id: "someone-else", ok: true, result: 1 });
    expect(rpc.inFlight).toBe(1);
    model.reply({ bytes: 5 }, true, [new DataView(new TextEncoder().encode("hello").buffer)]);
    const reply = await p;
    expect(reply.result).toEqual({ bytes: 5 });
    expect(bufferText(reply.buffers[0])).toBe("hello");
    expect(rpc.inFlight).toBe(0);
  });

  it("rejects with the error the kernel sent", async () => {
    const model = fakeModel();
    const rpc = new Rpc(model as any);
    const p = rpc.request("apply", {});
    model.reply({ summary: "no such loop", involved: ["q"] }, false);
    await expect(p).rejects.toBeInstanceOf(RpcFailure);
    await expect(p).rejects.toMatchObject({ error: { summary: "no such loop", involved: ["q"] } });
  });

  it("times out and cleans up on dispose", async () => {
    vi.useFakeTimers();
    const model = fakeModel();
    const rpc = new Rpc(model as any, 1000);
    const p = rpc.request("undo");
    vi.advanceTimersByTime(1001);
    await expect(p).rejects.toThrow(/did not answer/);
    const q = rpc.request("redo");
    rpc.dispose();
    await expect(q).rejects.toThrow(/closed/);
    vi.useRealTimers();
  });

  it("waits for each request as long as its row of REQUESTS says (timeout_s)", async () => {
    vi.useFakeTimers();
    try {
      const model = fakeModel();
      const rpc = new Rpc(model as any);
      const settled: string[] = [];
      const track = (name: string, p: Promise<unknown>) => p.catch(() => settled.push(name));
      const waits = { apply: REQUESTS.apply.timeout_s, measure: REQUESTS.measure.timeout_s, class_submit: REQUESTS.class_submit.timeout_s };
      expect(waits.apply).toBeLessThan(waits.measure);
      expect(waits.measure).toBeLessThan(waits.class_submit);
      const all = Object.keys(waits).map((name) => track(name, rpc.request(name)));
      track("unlisted", rpc.request("not_in_the_table"));
      let now = 0;
      for (const [name, s] of Object.entries(waits)) {
        await vi.advanceTimersByTimeAsync(s * 1000 - 1 - now); // a millisecond before its time: still waiting
        expect(settled).not.toContain(name);
        await vi.advanceTimersByTimeAsync(2);
        expect(settled).toContain(name);
        now = s * 1000 + 1;
      }
      expect(settled).toEqual(["apply", "unlisted", "measure", "class_submit"]); // unlisted waits as most rows do
      expect(requestTimeoutMs("not_in_the_table")).toBe(120_000);
      await Promise.all(all);
      expect(rpc.inFlight).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });
});
