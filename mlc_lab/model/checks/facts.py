"""The facts of a scheduled function that the named checks read, as plain data (no TVM, no mlc_lab).

``mlc_lab.tvm.checks.facts`` fills them from a PrimFunc; ``mlc_lab.core.checks.facts`` judges them.
Loop ids are those of the access program (``mlc_lab.model.access.program``).
"""

from __future__ import annotations

from dataclasses import dataclass

from mlc_lab.model.access.program import AccessProgram


@dataclass(frozen=True)
class BlockFact:
    """A block: ``loops`` (access-program ids, outermost first), ``iters`` one ``(kind, loop ids)``
    per iteration variable (kind "S" spatial, "R" reduction, "O" other)."""

    name: str
    loops: tuple
    iters: tuple
    has_init: bool
    reads: tuple
    writes: tuple
    tensorized: bool = False
    annotations: tuple = ()  # (key, value) pairs of the block's own annotations (T.sblock_attr)

    def annotation(self, key: str, default: object = None) -> object:
        return next((v for k, v in self.annotations if k == key), default)

    def loops_of(self, kind: str) -> set:
        return {lid for k, ids in self.iters if k == kind for lid in ids}


@dataclass
class ScheduleFacts:
    name: str
    program: AccessProgram
    blocks: dict  # name -> BlockFact, program order
    annotations: dict  # loop id -> {key: value}
    allocated: dict  # buffer -> shape TVM allocates (compacted) for shared/local buffers
    params: tuple = ()  # buffers the function takes as arguments (the others it allocates)
