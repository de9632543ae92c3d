// Request/response over anywidget custom messages, correlated by id (the quak pattern).
// Python side: mlc_lab/widgets/_base.py (RpcWidget). Kept free of DOM so every widget can share it.

import { type ErrorInfo, REQUEST, REQUESTS, RESPONSE, type RequestMessage, type RequestName, type RequestParams, type RequestResults, type ResponseMessage } from "./model";
import { KERNEL_LOST, NEEDS_KERNEL, kernelLive, offlineHandler, onKernelLost, recordedReply, refused } from "./offline";

export { REQUEST, RESPONSE };

/** A failed request's answer (generated from mlc_lab/model/errors.py: its `type` is one of ERROR_KINDS). */
export type RpcError = ErrorInfo;

export class RpcFailure extends Error {
  readonly error: RpcError;
  constructor(error: RpcError) {
    super(error.summary);
    this.error = error;
  }
}

export interface RpcReply<T = unknown> {
  result: T;
  buffers: DataView[];
  elapsedMs?: number; // time the kernel spent on the request
}

interface MinimalModel {
  send(content: unknown, callbacks?: unknown, buffers?: ArrayBuffer[] | ArrayBufferView[]): void;
  on(eventName: "msg:custom", callback: (msg: any, buffers: DataView[]) => void): void;
  off(eventName?: string | null, callback?: ((...args: any[]) => void) | null): void;
}

interface Pending {
  resolve: (reply: RpcReply<any>) => void;
  reject: (err: Error) => void;
  timer: ReturnType<typeof setTimeout> | null;
}

let counter = 0;

/** How long the page waits for a request's answer: its row of the table (mlc_lab/model/requests.py,
 *  `timeout_s`); a name the table lacks (an untyped `request`) waits as long as most rows do. */
export function requestTimeoutMs(method: string): number {
  const row = (REQUESTS as Record<string, { timeout_s: number }>)[method];
  return (row?.timeout_s ?? DEFAULT_TIMEOUT_S) * 1000;
}
const DEFAULT_TIMEOUT_S = 120;

export class Rpc {
  private pending = new Map<string, Pending>();
  private readonly prefix = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  private readonly onMessage = (msg: ResponseMessage | null | undefined, buffers: DataView[] = []) => {
    if (!msg || msg.kind !== RESPONSE || typeof msg.id !== "string") return;
    const entry = this.pending.get(msg.id);
    if (!entry) return; // another view's request, or a late answer
    this.pending.delete(msg.id);
    if (entry.timer) clearTimeout(entry.timer);
    if (msg.ok) entry.resolve({ result: msg.result, buffers, elapsedMs: msg.elapsed_ms });
    else entry.reject(new RpcFailure(msg.error ?? { summary: "unknown error" }));
  };

  /** `timeoutMs` overrides every request's own wait (its `timeout_s` in REQUESTS; 0: wait for good). */
  constructor(
    private readonly model: MinimalModel,
    private readonly timeoutMs?: number,
  ) {
    model.on("msg:custom", this.onMessage);
    // The kernel went (restarted, shut down): nothing in flight will be answered; say so now.
    this.unlost = onKernelLost(model, () => this.failAll(new RpcFailure({ summary: KERNEL_LOST, type: "no_kernel" })));
  }

  private readonly unlost: () => void;

  private failAll(err: Error): void {
    const pending = [...this.pending.values()];
    this.pending.clear();
    for (const p of pending) {
      if (p.timer) clearTimeout(p.timer);
      p.reject(err);
    }
  }

  get inFlight(): number {
    return this.pending.size;
  }

  private listeners: Array<(msg: any) => void> = [];

  /** Messages the kernel sends of its own accord, by kind (``{"kind": "mlc-progress", ...}``). */
  listen(kind: string, cb: (msg: Record<string, unknown>) => void): void {
    const handler = (msg: any) => {
      if (msg && msg.kind === kind) cb(msg);
    };
    this.listeners.push(handler);
    this.model.on("msg:custom", handler);
  }

  /** Send one request of the table (mlc_lab/model/requests.py, generated into js/lib/model.ts): its
   *  parameters and its result are typed by the request's name. */
  call<K extends RequestName>(
    name: K,
    ...params: RequestParams[K] extends Record<string, never> ? [params?: RequestParams[K]] : [params: RequestParams[K]]
  ): Promise<RpcReply<RequestResults[K]>> {
    return this.request<RequestResults[K]>(name, (params[0] ?? {}) as Record<string, unknown>);
  }

  /** Untyped: a request by any name (tests; a caller of the table uses ``call``). */
  request<T = unknown>(method: string, params: Record<string, unknown> = {}, buffers: ArrayBuffer[] = []): Promise<RpcReply<T>> {
    const id = `${this.prefix}-${++counter}`;
    // A saved view has no kernel: say so now rather than time out in two minutes.
    if (!kernelLive(this.model)) return this.offline<T>(method, params);
    const waitMs = this.timeoutMs ?? requestTimeoutMs(method);
    return new Promise<RpcReply<T>>((resolve, reject) => {
      const timer =
        waitMs > 0
          ? setTimeout(() => {
              this.pending.delete(id);
              reject(new RpcFailure({ summary: `The kernel did not answer "${method}" in time (is it busy or stopped?).` }));
            }, waitMs)
          : null;
      this.pending.set(id, { resolve, reject, timer });
      const message: RequestMessage = { kind: REQUEST, id, method, params: params as Record<string, unknown> };
      this.model.send(message, undefined, buffers);
    });
  }

  /** No kernel: answer from what the widget recorded, or say plainly that it needs a kernel. */
  private async offline<T>(method: string, params: Record<string, unknown>): Promise<RpcReply<T>> {
    const answer = (await recordedReply(this.model, method, params)) ?? (await offlineHandler(this.model)?.(method, params)) ?? null;
    if (answer?.error) throw new RpcFailure({ ...answer.error, summary: String(answer.error.summary ?? "failed") });
    if (answer) return { result: answer.result as T, buffers: answer.buffers };
    refused(this.model, method);
    throw new RpcFailure({ summary: NEEDS_KERNEL, type: "no_kernel" });
  }

  dispose(): void {
    this.model.off("msg:custom", this.onMessage);
    this.unlost();
    for (const handler of this.listeners) this.model.off("msg:custom", handler);
    this.listeners = [];
    this.failAll(new Error("view closed"));
  }
}

/** Decode a UTF-8 text payload sent by Python as a binary buffer. */
export function bufferText(view: ArrayBufferView | ArrayBuffer | null | undefined): string {
  if (!view) return "";
  const bytes = ArrayBuffer.isView(view) ? new Uint8Array(view.buffer, view.byteOffset, view.byteLength) : new Uint8Array(view);
  return new TextDecoder().decode(bytes);
}

/** Parse JSON sent as bytes (a trait synced as a binary buffer); null/empty gives {}. */
export function parseJsonBuffer<T = any>(value: ArrayBufferView | ArrayBuffer | string | null | undefined): T {
  if (value === null || value === undefined) return {} as T;
  const text = typeof value === "string" ? value : bufferText(value);
  if (!text) return {} as T;
  try {
    return JSON.parse(text) as T;
  } catch {
    return {} as T;
  }
}
