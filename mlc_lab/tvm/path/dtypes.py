"""Reading ``unsafe_set_dtype`` off a target: a buffer the program allocates that the target keeps
under the same name, shape and scope with another element type. The engine sets that type on the
block that writes it, before anything else (TVM casts the stored value and every read of it), and
goes on from there; TVM's ``structural_equal`` still judges the end.
"""

from __future__ import annotations

from mlc_lab.tvm.path.ir import FuncView
from mlc_lab.tvm.path.work import Work


def retyped(cur: FuncView, tgt: FuncView) -> list[tuple[str, str]]:
    """(buffer, the target's dtype) for every allocated buffer the target only types otherwise."""
    out = []
    for buf in cur.allocs():
        name = str(buf.name)
        there = next((b for b in tgt.allocs() if str(b.name) == name), None)
        if there is None or str(there.dtype) == str(buf.dtype):
            continue
        same_shape = [int(x) for x in buf.shape if hasattr(x, "value")] == [
            int(x) for x in there.shape if hasattr(x, "value")
        ] and len(buf.shape) == len(there.shape)
        if same_shape and str(buf.scope()) == str(there.scope()):
            out.append((name, str(there.dtype)))
    return out


def apply(work: Work, buffer: str, dtype: str) -> bool:
    """Set ``buffer``'s type on its one writer; False when no single block writes it."""
    writers = [b for b in work.view.blocks if buffer in b.writes()]
    if len(writers) != 1:
        return False
    block = writers[0]
    why = f"the target keeps {buffer} as {dtype}"
    index = block.writes().index(buffer)
    work.apply("unsafe_set_dtype", why, block=work.block_rv(block.name), buffer_index=index, dtype=dtype)
    return True
