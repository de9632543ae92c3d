"""The plain-data model every view reads: one frozen ``StepView`` per step, pushed as a ``Change``.

This module imports nothing from TVM and nothing of mlc_lab, so every layer may use it (the
widgets and their tests, core, and the one door to TVM); it has no other address.
Each type has exactly one JSON encoding (``to_json``); the TypeScript types in ``js/lib/model.ts``
are generated from the dataclasses here (``python -m mlc_lab.core.model_ts``; a test fails when they are stale).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Iterator, Literal, NotRequired, TypedDict


__all__ = [
    "HistoryResult",
    "BlockNode",
    "BufferInfo",
    "Change",
    "Decision",
    "FailedAttempt",
    "FuncNode",
    "IterVar",
    "LoopNode",
    "LoopTree",
    "StepSummary",
    "StepView",
    "changed_lines",
    "plain",
    "ref_of",
    "replace",
]
# What js/lib/model.ts gets of this module, in order (python -m mlc_lab.core.model_ts).
WIRE = (
    "BufferInfo",
    "IterVar",
    "LoopNode",
    "BlockNode",
    "FuncNode",
    "LoopTree",
    "Decision",
    "StepSummary",
    "HistoryResult",
    "FailedAttempt",
    "StepView",
)


# --- the primitives' vocabulary -------------------------------------------------------------------
# The thread axes bind takes: CUDA's grid and block indices, TVM's virtual threads. The explorer's
# form offers these (js/lib/model.ts has them, generated); the Session also takes the legacy
# spelling, which TVM 0.27 warns "is going to be deprecated", for code written against older TVM.
THREAD_AXES = (
    "blockIdx.x",
    "blockIdx.y",
    "blockIdx.z",
    "threadIdx.x",
    "threadIdx.y",
    "threadIdx.z",
    "vthread.x",
    "vthread.y",
    "vthread.z",
)
LEGACY_THREAD_AXES = ("vthread",)
# The primitives whose result is a list even when it holds one value (``l0, = sch.get_loops(...)``):
# the Session returns a list, the trace printer writes ``l0,``.
LIST_RESULTS = frozenset(
    {
        "get_loops",
        "get_child_blocks",
        "get_producers",
        "get_consumers",
        "get_output_blocks",
        "split",
        "loop_partition",
        "sample_perfect_tile",
        "sample_partitioned_tile",
        "cache_inplace",
        "cache_index",
    }
)

# --- the loop tree -------------------------------------------------------------------------------
# The shape of the loop nest as every view reads it, built from the printed script (mlc_lab.tvm.looptree).
# Nodes are the JSON objects themselves (no conversion on the way to the front end); these TypedDicts
# say what they hold, and js/lib/model.ts is generated from them.


class BufferInfo(TypedDict):
    name: str
    shape: list[int | str]  # each extent an int, or a symbolic one's text ("n")
    dtype: str
    scope: str
    origin: str  # "param" | "alloc" | "alloc in <block>"


class IterVar(TypedDict):
    name: str
    kind: str  # "spatial" | "reduce" | "ordered" | "opaque"
    extent: int | str | None
    binding: str


class LoopNode(TypedDict):
    kind: Literal["loop"]
    name: str  # as printed
    qualified: str  # unique in the module: "j", "Y/j" or "func:Y/j" (see LoopTree.match)
    extent: int | str
    min: int | str
    loop_kind: Literal["serial", "parallel", "vectorized", "unrolled", "thread_binding"]
    thread: str | None
    annotations: dict
    line: int  # 1-based lines of the printed script
    end_line: int
    children: list["LoopNode | BlockNode"]
    in_init: NotRequired[bool]  # inside a block's T.init()


class BlockNode(TypedDict):
    kind: Literal["block"]
    name: str
    iter_vars: list[IterVar]
    reads: list[str]
    writes: list[str]
    has_init: bool
    predicate: str | None  # T.where(...)
    alloc_buffers: list[str]
    annotations: dict
    line: int
    end_line: int
    children: list["LoopNode | BlockNode"]
    in_init: NotRequired[bool]


class FuncNode(TypedDict):
    kind: Literal["func"]
    name: str
    buffers: list[BufferInfo]
    children: list["LoopNode | BlockNode"]


class Decision(TypedDict):
    """One sampling instruction of a step's trace, with the values it may take."""

    index: int  # among the sampling instructions
    position: int  # in the trace
    kind: str  # "SamplePerfectTile" | "SampleCategorical" | "SampleComputeLocation"
    value: Any
    choices: list | None
    loop: str | None  # the loop a perfect tile splits
    extent: int | None
    n: NotRequired[int]
    max_innermost_factor: NotRequired[int]
    candidates: NotRequired[list]
    probs: NotRequired[list]


def ref_of(node: dict) -> str:
    """The name a view hands back to the Session for a node: the qualified one when it has one."""
    return str(node.get("qualified") or node["name"])


class LoopTree(dict):
    """``{"func": focus function, "functions": [FuncNode, ...]}``: the loop nest of one step.

    A dict (it is its own JSON encoding) with the one walker and THE one rule that finds loops and
    blocks by name (:meth:`match`), used by the Session, the analyses and the widgets alike; the
    TypeScript port (js/lib/names.ts) is held to the same answers by tests/fixtures/name_rule.json.
    Treat it as read-only: a step's tree is shared by every view of the step.
    """

    @property
    def focus(self) -> str | None:
        return self.get("func")

    def to_json(self) -> dict:
        return self

    def walk(self) -> Iterator[tuple[dict, dict, tuple[dict, ...]]]:
        """(node, its function, the nodes above it) for every loop and block, in pre-order."""
        return iter(self._walked())

    def _walked(self) -> list[tuple[dict, dict, tuple[dict, ...]]]:
        # A step's tree does not change once built: walk it once (names are looked up many times).
        cached = self.__dict__.get("_walk")
        if cached is not None and cached[0] == len(self.get("functions") or ()):
            return cached[1]  # type: ignore[no-any-return]  # the list made below
        out: list[tuple[dict, dict, tuple[dict, ...]]] = []
        for fn in self.get("functions") or []:
            stack: list[tuple[dict, tuple[dict, ...]]] = [(c, ()) for c in reversed(fn.get("children") or [])]
            while stack:
                node, above = stack.pop()
                out.append((node, fn, above))
                below = above + (node,)
                stack.extend((c, below) for c in reversed(node.get("children") or []))
        self.__dict__["_walk"] = (len(self.get("functions") or ()), out)
        return out

    def loops(self) -> list[dict]:
        return [n for n, _, _ in self.walk() if n["kind"] == "loop"]

    def blocks(self) -> list[dict]:
        return [n for n, _, _ in self.walk() if n["kind"] == "block"]

    def match(self, text: str, kind: str | None = None) -> list[dict]:
        """Every loop (or block) that ``text`` names, in pre-order. The rule:

        1. a node whose qualified name (blocks: their name) is ``text`` is the answer;
        2. otherwise ``text`` is ``[func:][block/]name``: loops called ``name``, in ``func`` if given,
           with the block ``block`` somewhere inside if given (blocks: called ``name``, in ``func``);
        3. an unqualified name found in several functions means the focus function's.
        One match: found; none: unknown; several: ambiguous (qualify it with a block inside).
        """
        if not text:
            return []
        refs, names = self._names()
        exact = [n for n in refs.get(text, ()) if kind is None or n["kind"] == kind]
        if exact:
            return exact
        func, _, rest = text.rpartition(":")
        block, _, name = rest.rpartition("/")
        found = []
        for n, fn in names.get(name, ()):
            if (kind is not None and n["kind"] != kind) or (func and fn["name"] != func):
                continue
            if n["kind"] == "block":
                if not block:
                    found.append((n, fn))
            elif not block or block in _blocks_under(n):
                found.append((n, fn))
        if not func and not block and len({fn["name"] for _, fn in found}) > 1:
            focused = [(n, fn) for n, fn in found if fn["name"] == self.focus]
            found = focused or found
        return [n for n, _ in found]

    def _names(self) -> tuple[dict[str, list[dict]], dict[str, list[tuple[dict, dict]]]]:
        """({reference: nodes}, {bare name: [(node, function)]}), both in pre-order; built once per tree
        (a step's names are looked up once per argument of every later call)."""
        size = len(self.get("functions") or ())
        cached = self.__dict__.get("_name_index")
        if cached is not None and cached[0] == size:
            return cached[1]  # type: ignore[no-any-return]  # what index_names made
        return self.index_names([(n, fn) for n, fn, _ in self._walked()])

    def index_names(self, preorder: list[tuple[dict, dict]]) -> tuple[dict, dict]:
        """Index every (node, its function), given in pre-order."""
        refs: dict[str, list[dict]] = {}
        names: dict[str, list[tuple[dict, dict]]] = {}
        for n, fn in preorder:
            refs.setdefault(n.get("qualified") or n["name"], []).append(n)
            names.setdefault(n["name"], []).append((n, fn))
        return self.adopt_names(refs, names)

    def adopt_names(self, refs: dict[str, list[dict]], names: dict[str, list[tuple[dict, dict]]]) -> tuple[dict, dict]:
        """Take ``(refs, names)`` as this tree's name index, exactly as :meth:`index_names` would build
        it from the tree's pre-order: the scanner that builds a step's tree fills it as it makes the
        nodes, which saves a walk per step."""
        self.__dict__["_name_index"] = (len(self.get("functions") or ()), (refs, names))
        return refs, names

    def find(self, text: str, kind: str | None = None) -> dict | None:
        """The one node ``text`` names, or None when it names none or several (see :meth:`match`)."""
        found = self.match(text, kind)
        return found[0] if len(found) == 1 else None

    def chain(self, text: str) -> list[dict] | None:
        """The loops from the function's top down to the loop ``text`` names (None: no such loop)."""
        target = self.find(text, "loop")
        if target is None:
            return None
        for n, _, above in self.walk():
            if n is target:
                return [a for a in above if a["kind"] == "loop"] + [n]
        return None


def _blocks_under(node: dict) -> set[str]:
    out: set[str] = set()
    stack = list(node.get("children") or [])
    while stack:
        n = stack.pop()
        if n["kind"] == "block":
            out.add(n["name"])
        stack.extend(n.get("children") or [])
    return out


@dataclass(frozen=True)
class StepSummary:
    """What the history shows of a step: enough to draw its row. Never changes once made."""

    id: int
    parent: int | None
    kind: str  # "root" | "apply" | "decision" | "replay" | "run"
    primitive: str | None
    label: str

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "parent": self.parent,
            "kind": self.kind,
            "primitive": self.primitive,
            "label": self.label,
        }


# The summaries of steps ``from``, ``from + 1``, ... (from 0: the whole list); ``from`` is a Python keyword.
# ``visited``: where redo goes from each step (the child visited last), by the parent's id.
HistoryResult = TypedDict(
    "HistoryResult", {"from": int, "steps": list[StepSummary], "visited": NotRequired[dict[str, int | str]]}
)
HistoryResult.__doc__ = "The summaries of steps `from`, `from + 1`, ... (from 0: the whole list)."


@dataclass(frozen=True)
class FailedAttempt:
    """A step that was tried and failed, kept in the session's history (``Session.failed``).

    ``parent`` is the step it was tried from; ``label`` reads as the step would have; ``summary``,
    ``detail`` and ``involved`` (loop and block names) come from the error. Never changes once made.
    """

    id: int
    parent: int | None
    primitive: str
    label: str
    summary: str
    detail: str = ""
    involved: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "parent": self.parent,
            "primitive": self.primitive,
            "label": self.label,
            "summary": self.summary,
            "detail": self.detail,
            "involved": list(self.involved),
        }

    @classmethod
    def of(cls, exc: BaseException, *, id: int, parent: int | None, primitive: str, label: str) -> FailedAttempt:  # noqa: A002
        """The attempt as the error tells it (ScheduleStepError's summary, detail and involved names)."""
        summary = getattr(exc, "summary", None) or (str(exc).split("\n", 1)[0].strip() or type(exc).__name__)
        return cls(
            id=id,
            parent=parent,
            primitive=str(getattr(exc, "primitive", None) or primitive),
            label=label,
            summary=str(summary),
            detail=str(getattr(exc, "detail", "") or ""),
            involved=tuple(str(n) for n in getattr(exc, "involved", ()) or ()),
        )


@dataclass(frozen=True)
class StepView:
    """Everything a view shows of one step, computed once when the step is first looked at.

    ``changed_lines`` are the 1-based lines of ``script`` that the step inserted or rewrote against
    its parent (indentation-only changes do not count); ``created`` the names of the loops and blocks
    the step made, as the step's primitive returned them; ``decisions`` one entry per sampling
    instruction of the step's trace. It never changes once made: a step's measurements are kept beside
    it (``Session.measurements``) and travel on their own.
    """

    id: int
    parent: int | None
    kind: str
    primitive: str | None
    label: str
    script: str
    loop_tree: LoopTree
    trace: str
    changed_lines: tuple[int, ...] = ()
    created: tuple[str, ...] = ()
    decisions: tuple[Decision, ...] = ()

    @property
    def summary(self) -> StepSummary:
        return StepSummary(self.id, self.parent, self.kind, self.primitive, self.label)

    def to_json(self) -> dict:
        return {
            **self.summary.to_json(),
            "script": self.script,
            "loop_tree": self.loop_tree,
            "trace": self.trace,
            "changed_lines": list(self.changed_lines),
            "created": list(self.created),
            "decisions": [dict(d) for d in self.decisions],
        }

    @cached_property
    def json_bytes(self) -> bytes:
        """``to_json`` as compact UTF-8 JSON, encoded once (a step is sent again on undo/redo/goto)."""
        return json.dumps(self.to_json(), separators=(",", ":")).encode("utf-8")


@dataclass(frozen=True)
class Change:
    """What a Session tells its listeners: ``kind`` of change and the step it is about.

    ``step`` is the session's current step after the change, except for ``"measure"`` where it is
    the step that was measured. ``added`` holds the steps the change created, oldest first (a
    replayed trace adds several); undo, redo, goto and measure add none.
    """

    kind: str  # "apply" | "decision" | "replay" | "run" | "undo" | "redo" | "goto" | "measure"
    step: StepView
    added: tuple[StepSummary, ...] = field(default_factory=tuple)


def plain(value: Any) -> Any:
    """A JSON-safe copy of plain data: tuples become lists, keys text, numpy scalars Python numbers,
    a sampled value (``.value``) its value; anything else its text. The one such helper the views use."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "shape", None) == ():  # a numpy scalar
        return plain(item())
    inner = getattr(value, "value", None)
    if isinstance(inner, (int, float, list, tuple)):  # a Sampled value
        return plain(inner)
    return str(value)


def changed_lines(before: str, after: str) -> list[int]:
    """1-based lines of ``after`` that are new or rewritten against ``before``.

    Lines are compared without their indentation: a reorder or compute_at re-indents whole nests,
    and only what the step really rewrote should light up.
    """
    a = [ln.strip() for ln in before.splitlines()]
    b = [ln.strip() for ln in after.splitlines()]
    # A step usually rewrites one region: match the common head and tail cheaply first.
    head = 0
    while head < len(a) and head < len(b) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < len(a) - head and tail < len(b) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    out: list[int] = []
    matcher = difflib.SequenceMatcher(None, a[head : len(a) - tail], b[head : len(b) - tail], autojunk=False)
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            out.extend(range(head + j1 + 1, head + j2 + 1))
    return out
