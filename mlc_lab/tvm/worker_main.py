"""The measure worker: a long-lived process that builds and runs generated code for the kernel.

Protocol: one JSON object per line on stdin ({"id", "op", ...}); one JSON object per line back on
the *original* stdout ({"id", "ok", "result"} or {"id", "ok": false, "kind", "error", "detail"}).
File descriptor 1 is pointed at stderr once started, so that anything TVM or generated code prints
cannot corrupt the protocol. The first line written is {"ready": true, ...}.
"""

from __future__ import annotations

import json
import os
import sys
import traceback


def main() -> int:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    from mlc_lab.tvm import build, lower

    def send(obj: dict) -> None:
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    send({"ready": True, "pid": os.getpid(), "env": build.environment()})
    handlers = {
        "measure": build.measure_request,
        "cuda": build.cuda_request,
        "lower": lower.lower_request,
        "env": lambda req: build.environment(),
    }
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        req = json.loads(line)
        rid = req.get("id")
        op = req.get("op")
        try:
            if op == "exit":
                send({"id": rid, "ok": True, "result": None})
                return 0
            handler = handlers.get(op)
            if handler is None:
                raise build.MeasureFailure("protocol", f"unknown request {op!r}")
            send({"id": rid, "ok": True, "result": handler(req)})
        except build.MeasureFailure as exc:
            send({"id": rid, "ok": False, "kind": exc.kind, "error": exc.message, "detail": exc.detail})
        except Exception as exc:  # noqa: BLE001 - everything else is reported, the worker lives on
            send(
                {
                    "id": rid,
                    "ok": False,
                    "kind": "internal",
                    "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:500],
                    "detail": str(exc) + "\n" + traceback.format_exc(),
                }
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
