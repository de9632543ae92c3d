"""A stand-in for mlc_lab.Session (same contract, no TVM) and a recording comm.

tests/widgets/test_session_contract.py holds the fake and the real Session to the same contract
(mlc_lab.core.protocol.SessionLike).

The fake keeps a real branching step tree, a loop tree that follows split/parallel/vectorize/
unroll, decisions, and the errors the real Session raises, so every front-end request can be
checked without TVM.
"""

from __future__ import annotations

import time

import copy
import json
from dataclasses import dataclass
from typing import Any

from mlc_lab.core.history import History
from mlc_lab.model.steps import Change, LoopTree, StepView, changed_lines
from mlc_lab.model.measure import Measurement
from mlc_lab.errors import (
    DecisionError,
    MeasureError,
    MlcLabError,
    NameResolutionError,
    NoGPUError,
    ScheduleStepError,
    TraceParseError,
)


class RecordingComm:
    """What ipywidgets needs from a comm; keeps every message sent to the front end."""

    kernel = "fake-kernel"  # ipywidgets only sends when this is not None

    def __init__(self, **kwargs: Any):
        self.comm_id = kwargs.get("comm_id") or f"comm-{id(self)}"
        self.open_data = kwargs.get("data")
        self.open_buffers = [bytes(b) for b in (kwargs.get("buffers") or [])]
        self.sent: list[dict] = []
        self.handler = None
        self.closed = False

    def send(self, data=None, metadata=None, buffers=None):
        self.sent.append({"data": data, "buffers": [bytes(b) for b in (buffers or [])]})

    def on_msg(self, callback):
        self.handler = callback

    def on_close(self, callback):
        pass

    def open(self, *args, **kwargs):
        pass

    def close(self, *args, **kwargs):
        self.closed = True

    # --- front end -> kernel ---------------------------------------------------------------------
    def deliver(self, data: dict, buffers: list[bytes] | None = None) -> None:
        assert self.handler is not None, "the widget did not register a message handler"
        self.handler({"content": {"comm_id": self.comm_id, "data": data}, "buffers": buffers or []})

    def request(self, method: str, params: dict | None = None, req_id: str = "r1") -> dict:
        """Send a front-end request; return the response (with its buffers)."""
        start = len(self.sent)
        self.deliver(
            {
                "method": "custom",
                "content": {"kind": "mlc-request", "id": req_id, "method": method, "params": params or {}},
            }
        )
        deadline = time.monotonic() + 60  # a background request answers from its own thread
        while True:
            replies = [
                m
                for m in self.sent[start:]
                if m["data"].get("method") == "custom"
                and m["data"]["content"].get("kind") == "mlc-response"
                and m["data"]["content"].get("id") == req_id
            ]
            if replies or time.monotonic() > deadline:
                break
            time.sleep(0.005)
        assert len(replies) == 1, f"expected one response, got {replies}"
        reply = dict(replies[0]["data"]["content"])
        reply["buffers"] = replies[0]["buffers"]
        return reply

    def updates(self, since: int = 0) -> list[dict]:
        """State updates sent to the front end after message number ``since`` (binary traits put
        back in place as bytes)."""
        return [
            _with_buffers(m["data"]["state"], m["data"].get("buffer_paths") or [], m["buffers"])
            for m in self.sent[since:]
            if m["data"].get("method") == "update"
        ]

    def opened(self) -> dict:
        """The whole state the widget opened with (binary traits as bytes)."""
        return _with_buffers(self.open_data["state"], self.open_data.get("buffer_paths") or [], self.open_buffers)


def wait_until(pred, timeout: float = 10.0) -> None:
    """Until ``pred()`` holds; fails the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _with_buffers(state: dict, paths: list, buffers: list[bytes]) -> dict:
    out = dict(state)
    for path, data in zip(paths, buffers):
        if len(path) == 1:
            out[path[0]] = data
    return out


def step_of(state: dict) -> dict:
    """The StepView JSON in an explorer state message (the ``step`` trait)."""
    return json.loads(state["step"])


BASE_SCRIPT = """# fake TVMScript
@T.prim_func
def mm_relu(A, B, C):
    Y = T.alloc_buffer((128, 128))
    for i, j, k in T.grid(128, 128, 128):
        with T.sblock("Y"):
            Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid(128, 128):
        with T.sblock("C"):
            C[vi, vj] = T.max(Y[vi, vj], T.float32(0))
"""


def _loop(name, extent, qualified=None, children=None, line=5):
    return {
        "kind": "loop",
        "name": name,
        "qualified": qualified or name,
        "extent": extent,
        "min": 0,
        "loop_kind": "serial",
        "thread": None,
        "annotations": {},
        "line": line,
        "end_line": line + 2,
        "children": children or [],
    }


def _block(name, iters, reads, writes, has_init, line):
    return {
        "kind": "block",
        "name": name,
        "iter_vars": [{"name": f"v{n}", "kind": k, "extent": 128, "binding": n} for n, k in iters],
        "reads": reads,
        "writes": writes,
        "has_init": has_init,
        "alloc_buffers": [],
        "annotations": {},
        "line": line,
        "end_line": line + 1,
        "children": [],
    }


def base_tree() -> dict:
    y = _block(
        "Y", [("i", "spatial"), ("j", "spatial"), ("k", "reduce")], ["A[vi, vk]", "B[vk, vj]"], ["Y[vi, vj]"], True, 6
    )
    c = _block("C", [("i", "spatial"), ("j", "spatial")], ["Y[vi, vj]"], ["C[vi, vj]"], False, 9)
    return {
        "func": "mm_relu",
        "functions": [
            {
                "kind": "func",
                "name": "mm_relu",
                "buffers": [{"name": n, "shape": [128, 128], "dtype": "float32", "scope": "global"} for n in "ABCY"],
                "children": [
                    _loop("i", 128, "Y/i", [_loop("j", 128, "Y/j", [_loop("k", 128, "k", [y])])], line=5),
                    _loop("i", 128, "C/i", [_loop("j", 128, "C/j", [c])], line=8),
                ],
            }
        ],
    }


@dataclass
class _State:
    script: str
    tree: dict
    trace: list[str]
    decisions: list[dict]


class FakeSession:
    func_name = "mm_relu"

    def __init__(self):
        self._history = History()  # the Session's own tree (plain data: no TVM)
        self._states = {0: _State(BASE_SCRIPT, base_tree(), [], [])}
        self._listeners = []
        self._added = []
        self.events: list[str] = []
        self.measurements: dict[int, Measurement] = {}
        # knobs of the fake measure worker
        self.has_gpu = False
        self.gpu_bound = False  # cuda_source: pretend the loops are bound to GPU threads
        self.measure_gate = None  # a threading.Event the fake measure waits on (to watch "measuring")
        self.measure_calls: list[tuple[str, int]] = []

    # --- reading ---------------------------------------------------------------------------------
    @property
    def steps(self):
        return self._history.steps

    @property
    def current(self):
        return self._history.current

    @property
    def _current(self):
        return self._history.current_id

    @property
    def visited_children(self):
        return self._history.visited_children

    @property
    def script(self):
        return self._states[self._current].script

    def script_at(self, step):
        if step not in self._states:
            raise MlcLabError(f"there is no step {step!r}")
        return self._states[step].script

    def step_view(self, step=None):
        sid = self._current if step is None else step
        if sid not in self._states:
            raise MlcLabError(f"there is no step {sid!r}")
        s, state = self._history[sid], self._states[sid]
        lines = changed_lines(self._states[s.parent].script, state.script) if s.parent is not None else []
        return StepView(
            id=s.id,
            parent=s.parent,
            kind=s.kind,
            primitive=s.primitive,
            label=s.label,
            script=state.script,
            loop_tree=LoopTree(copy.deepcopy(state.tree)),
            trace="\n".join(state.trace),
            changed_lines=tuple(lines),
            created=tuple(s.created),
            decisions=tuple(copy.deepcopy(state.decisions)),
        )

    @property
    def trace(self):
        return "\n".join(self._states[self._current].trace)

    @property
    def trace_json(self):
        return [["inst", line] for line in self._states[self._current].trace]

    @property
    def trace_python(self):
        body = self._states[self._current].trace or ["pass"]
        return "def schedule(sch):\n" + "".join(f"    {b}\n" for b in body)

    @property
    def decisions(self):
        return copy.deepcopy(self._states[self._current].decisions)

    # --- changing --------------------------------------------------------------------------------
    @property
    def failed(self):
        return self._history.failed

    def apply(self, primitive, *args, **kwargs):
        try:
            return self._apply(primitive, *args, **kwargs)
        except MlcLabError as exc:  # kept as the Session keeps them, labelled as the step would be
            label = f"{primitive}({', '.join([*map(str, args), *(f'{k}={v}' for k, v in kwargs.items())])})"
            self._history.fail(exc, primitive, label)
            raise

    def _apply(self, primitive, *args, **kwargs):
        state = copy.deepcopy(self._states[self._current])
        loop_name = kwargs.get("loop", args[0] if args else None)
        label = f"{primitive}({', '.join([*map(str, args), *(f'{k}={v}' for k, v in kwargs.items())])})"
        result: Any = None
        if primitive in ("split", "parallel", "vectorize", "unroll", "sample_perfect_tile"):
            node = self._find_loop(state.tree, loop_name, primitive)
            if primitive == "vectorize" and node["name"] == "k":
                raise ScheduleStepError(
                    "k is a reduction loop and cannot be vectorized",
                    primitive=primitive,
                    detail="TVM: the block binding uses a reduction iterator",
                    involved=["k", "Y"],
                )
            if primitive == "split":
                factors = kwargs.get("factors") or args[1]
                factors = [int(f) if hasattr(f, "value") is False and f is not None else f for f in factors]
                inner = factors[-1] if isinstance(factors[-1], int) else 4
                base = node["name"]
                outer = dict(node, name=f"{base}_0", qualified=f"{base}_0", extent=node["extent"] // inner)
                inner_node = dict(
                    node, name=f"{base}_1", qualified=f"{base}_1", extent=inner, children=node["children"]
                )
                outer["children"] = [inner_node]
                node.clear()
                node.update(outer)
                result = [f"{base}_0", f"{base}_1"]
            elif primitive == "sample_perfect_tile":
                value = [node["extent"] // 4, 4]
                state.decisions.append(
                    {
                        "index": len(state.decisions),
                        "kind": "SamplePerfectTile",
                        "value": value,
                        "choices": [[node["extent"] // d, d] for d in (1, 2, 4, 8)],
                        "loop": node["name"],
                        "extent": node["extent"],
                    }
                )
                result = [SampledValue(value[0]), SampledValue(value[1])]
            else:
                node["loop_kind"] = {"parallel": "parallel", "vectorize": "vectorized", "unroll": "unrolled"}[primitive]
        elif primitive == "reorder":
            for name in args:
                self._find_loop(state.tree, name, primitive)
        elif primitive in ("decompose_reduction", "compute_inline"):
            pass
        else:
            raise ScheduleStepError(f"the fake session does not know {primitive}", primitive=primitive)
        state.script = state.script + f"# {label}\n"
        state.trace.append(f"sch.{label}")
        step = self._add(state, primitive, label, "apply", notify=False)
        if primitive == "split":
            step.created = tuple(result)
        self._notify("apply")
        return result

    def _find_loop(self, tree, name, primitive):
        matches = LoopTree(tree).match(name, "loop")  # the Session's own rule
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise NameResolutionError(
                f"there is no loop named {name!r}",
                primitive=primitive,
                candidates=sorted(n["qualified"] for n in LoopTree(tree).loops()),
            )
        raise NameResolutionError(
            f"the loop name {name!r} is ambiguous", primitive=primitive, candidates=[n["qualified"] for n in matches]
        )

    def _add(self, state, primitive, label, kind, parent=None, notify=True):
        step = self._history.add(kind, primitive, label, parent=parent)
        self._added.append(step)
        self._states[step.id] = state
        if notify:
            self._notify(kind)
        return step

    def undo(self):
        self._history.undo()
        self._notify("undo")
        return self.current

    def redo(self):
        self._history.redo()
        self._notify("redo")
        return self.current

    def goto(self, step):
        self._history.goto(step)
        self._notify("goto")
        return self.current

    def set_decision(self, index, value):
        decisions = self.decisions
        if not 0 <= index < len(decisions):
            raise DecisionError(f"there is no sampling instruction #{index}")
        if list(value) not in [list(c) for c in decisions[index]["choices"]]:
            raise DecisionError(f"{value} is not a perfect tiling of {decisions[index]['extent']}")
        state = copy.deepcopy(self._states[self._current])
        state.decisions[index]["value"] = list(value)
        state.script += f"# decision {index} = {list(value)}\n"
        self._add(state, "SamplePerfectTile", f"decision #{index} = {list(value)}", "decision")
        return self.current

    def replay(self, trace):
        text = trace if isinstance(trace, str) else json.dumps(trace)
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if not lines:
            raise TraceParseError("the trace has no schedule steps")
        for n, ln in enumerate(lines, start=1):
            if not ln.strip().startswith("sch."):
                raise TraceParseError(f"not a schedule call: {ln.strip()!r}", line=n)
        state = copy.deepcopy(self._states[0])
        state.trace = [ln.strip() for ln in lines]
        state.script += "".join(f"# {ln.strip()}\n" for ln in lines)
        self._add(state, "replay", "replay", "replay", parent=0)
        return self.current

    # --- measuring (the real one runs in a worker process) ------------------------------------
    def measure(self, target="cpu", step=None, **kwargs):
        sid = self._current if step is None else step
        if sid not in self._states:
            raise MlcLabError(f"there is no step {sid!r}")
        self.measure_calls.append((str(target), sid))
        if self.measure_gate is not None:
            self.measure_gate.wait(10)
        if target == "cuda" and not self.has_gpu:
            raise NoGPUError(
                "no CUDA GPU found; you can still build, inspect and visualise the CUDA program "
                "(cuda_source(...)), but not run or time it",
                kind="no_gpu",
            )
        latency = 0.004 / (1 + sid)
        flops = 2.0 * 128**3
        result = Measurement(
            latency_s=latency,
            std_s=latency / 100,
            min_s=latency * 0.99,
            max_s=latency * 1.01,
            repeats=5,
            flops=flops,
            gflops=flops / latency / 1e9,
            max_abs_error=0.0 if sid != 2 else 0.5,
            max_rel_error=0.0,
            correct=sid != 2,
            target='{"kind":"llvm","mcpu":"fake"}' if target == "cpu" else '{"kind":"cuda"}',
        )
        self.measurements[sid] = result
        self._notify("measure", sid)
        return result

    def cuda_source(self, step=None, ptx=False, **kwargs):
        sid = self._current if step is None else step
        if not self.gpu_bound:
            raise MeasureError(
                "the program has unbound loops: on a CUDA target they would silently run on the host.\n"
                "  block 'Y' is not inside a blockIdx/threadIdx loop (loops above it: i, j, k)\n"
                "  block 'C' is not inside a blockIdx/threadIdx loop (loops above it: i, j)",
                kind="gpu_check",
            )
        source = (
            f"// step {sid}\n"
            'extern "C" __global__ void __launch_bounds__(128) main_kernel(float* __restrict__ A) {\n'
            "  A[((int)blockIdx.x) * 128 + ((int)threadIdx.x)] = 0.0f;\n}\n"
        )
        kernels = [
            {
                "name": "main_kernel",
                "threads_per_block": 128,
                "blocks": 8,
                "shared_bytes": 0,
                "local_bytes": 0,
                "thread_extents": {"blockIdx.x": 8, "threadIdx.x": 128},
            }
        ]
        return FakeCudaBuild(
            source=source,
            full_source="#include <cuda.h>\n" + source,
            kernels=kernels,
            ptx=".visible .entry main_kernel()" if ptx else None,
            ptx_error=None,
        )

    def on_change(self, callback):
        self._listeners.append(callback)

        def unsubscribe():
            if callback in self._listeners:
                self._listeners.remove(callback)

        return unsubscribe

    def _notify(self, event, step=None):
        self.events.append(event)
        added, self._added = self._added, []
        change = Change(event, self.step_view(step), tuple(self.step_view(a.id).summary for a in added))
        for cb in list(self._listeners):
            cb(change)


@dataclass
class FakeCudaBuild:
    source: str
    full_source: str
    kernels: list
    ptx: str | None = None
    ptx_error: str | None = None


class SampledValue:
    def __init__(self, value):
        self.value = value

    def __int__(self):
        return self.value
