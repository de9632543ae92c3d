"""The access program: a plain description of a tensor function for the access analysis.

``mlc_lab.tvm.access`` lowers a PrimFunc into this shape once; everything in
``mlc_lab.core.access`` reads only these dataclasses (no TVM), so tests can build programs by hand.

A program is a tree of loops, sequences and leaves. A leaf is one step of execution (a store, an
evaluated call, or one execution of a tensorized block); it holds the accesses made in that step,
in evaluation order (loads first, then the store). Block iteration variables and let-bound names
are already substituted by their values, so index expressions mention only loop variables (and
the names of symbolic shapes, see :func:`mlc_lab.core.access.shapes.bind_shapes`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

# --- index expressions ----------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Const:
    value: int

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True, eq=False)
class Var:
    """A loop variable (``id`` is the loop's id) or a symbolic shape variable (id < 0)."""

    id: int
    name: str

    def __str__(self) -> str:
        return self.name


# Operators of Op: binary arithmetic and comparisons, "not" (one argument) and "select"
# (condition, then, else: TVM's if_then_else and Select). "div"/"mod" round towards zero.
BINARY_OPS = (
    "add",
    "sub",
    "mul",
    "floordiv",
    "floormod",
    "div",
    "mod",
    "min",
    "max",
    "lt",
    "le",
    "gt",
    "ge",
    "eq",
    "ne",
    "and",
    "or",
)
_SYMBOL = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "floordiv": "//",
    "floormod": "%",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "eq": "==",
    "ne": "!=",
    "and": "and",
    "or": "or",
}


@dataclass(frozen=True, eq=False)
class Op:
    op: str
    args: tuple

    def __str__(self) -> str:
        if self.op in _SYMBOL and len(self.args) == 2:
            return f"({self.args[0]} {_SYMBOL[self.op]} {self.args[1]})"
        return f"{self.op}({', '.join(str(a) for a in self.args)})"


@dataclass(frozen=True, eq=False)
class Opaque:
    """Something the analysis cannot evaluate (a load inside an index, a float, an unknown call).

    ``text`` names it in plain words for the error message.
    """

    text: str

    def __str__(self) -> str:
        return self.text


Expr = Union[Const, Var, Op, Opaque]


def const(value: int) -> Const:
    return Const(int(value))


def op(name: str, *args: Expr | int) -> Op:
    return Op(name, tuple(a if not isinstance(a, int) else Const(a) for a in args))


def free_vars(e: Expr, out: set | None = None) -> set:
    """Ids of the variables ``e`` mentions."""
    out = set() if out is None else out
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Var):
            out.add(x.id)
        elif isinstance(x, Op):
            stack.extend(x.args)
    return out


# --- the program tree -----------------------------------------------------------------------------


@dataclass(eq=False)
class Loop:
    """A ``for`` loop. ``role`` is ``"loop"`` for the loops of the program's step tree, ``"inner"``
    for loops whose iterations all run within one step: loops inside a ``T.init()`` and the axes
    of a tensorized block's regions (``region`` in ``name``)."""

    id: int
    name: str
    min: Any  # int, or an Expr over shape variables (an int once the shapes are bound)
    extent: Any
    kind: str = "serial"  # serial / parallel / vectorized / unrolled / thread_binding
    tag: str | None = None  # thread tag when bound (threadIdx.x, blockIdx.y, ...)
    body: "Node | None" = None
    role: str = "loop"

    @property
    def var(self) -> Var:
        return Var(self.id, self.name)


@dataclass(eq=False)
class Seq:
    children: list = field(default_factory=list)


@dataclass(eq=False)
class Access:
    """One buffer access made in a step.

    ``guards`` are conditions that all hold when the access is made (block predicates, ``if``
    conditions, the reduction-init condition, the branch of an ``if_then_else``). ``inner`` are
    the loops of role ``"inner"`` (outermost first) this access runs under inside its step.
    ``label`` is ``""`` for the block's body, ``"init"`` for its ``T.init()``, ``"region"`` for the
    read/write region of a tensorized block. ``body_loops`` (a ``T.init()`` of a block whose body has
    loops) are the loops between the block and the leaf holding the init: the init runs before them,
    so a query on one of them does not see it (it is guarded by their first iteration).
    """

    buffer: str
    kind: str  # "read" / "write"
    indices: tuple
    block: str = ""
    guards: tuple = ()
    inner: tuple = ()
    label: str = ""
    body_loops: tuple = ()


@dataclass(eq=False)
class Leaf:
    accesses: list = field(default_factory=list)


Node = Union[Loop, Seq, Leaf]


@dataclass
class BufferInfo:
    name: str
    shape: tuple  # ints, or Exprs over shape variables
    dtype: str
    scope: str = "global"
    itemsize: int = 4
    layout: tuple | None = None  # (shape, strides) TVM gives a shared buffer at build time


@dataclass(eq=False)
class AccessProgram:
    """A function lowered for the analysis: buffers, the step tree and its loops (pre-order)."""

    name: str
    buffers: dict
    root: Node
    loops: list[Loop]  # every Loop, role "loop" and "inner", indexed by id
    shape_vars: dict = field(default_factory=dict)  # name -> Var of a symbolic shape

    def loop(self, ref: Loop | int | str) -> Loop:
        """A loop by id or by (unique) name."""
        if isinstance(ref, Loop):
            return ref
        if isinstance(ref, int):
            return self.loops[ref]
        found = [lp for lp in self.loops if lp.name == ref]
        if len(found) != 1:  # core's analysis says it as an AccessAnalysisError (see footprint.loop_of)
            what = "no loop" if not found else f"{len(found)} loops"
            raise LookupError(f"{what} called {ref!r} in function {self.name}")
        return found[0]
