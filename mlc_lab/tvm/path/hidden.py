"""Reading ``unsafe_hide_buffer_access`` off a target: a block of the target states fewer read or
write regions than the same block here, the rest of its list the same and in order. The engine
hides those accesses last (a later primitive would state the block's regions again) and TVM's
``structural_equal`` judges the end.
"""

from __future__ import annotations

from mlc_lab.tvm.path.ir import FuncView
from mlc_lab.tvm.path.work import Refused, Work


def hidden(cur: FuncView, tgt: FuncView) -> list[tuple[str, str, list[int]]]:
    """(block, "read" / "write", the indices here the target does not state) for every such block."""
    out = []
    for tblock in tgt.blocks:
        block = cur.block(tblock.name)
        if block is None:
            continue
        for kind, mine, theirs in (("read", block.reads(), tblock.reads()), ("write", block.writes(), tblock.writes())):
            gone = _dropped(mine, theirs)
            if gone:
                out.append((block.name, kind, gone))
    return out


def _dropped(mine: list[str], theirs: list[str]) -> list[int]:
    """The indices of ``mine`` to drop for ``theirs`` to remain, in order; empty when none do."""
    if len(theirs) >= len(mine):
        return []
    gone, at = [], 0
    for n, name in enumerate(mine):
        if at < len(theirs) and theirs[at] == name:
            at += 1
        else:
            gone.append(n)
    return gone if at == len(theirs) else []


def hide(work: Work, tgt: FuncView) -> bool:
    """Hide every access the target does not state; whether any was hidden."""
    done = False
    for block, kind, indices in hidden(work.view, tgt):
        what = ", ".join(
            (work.view.block(block).reads() if kind == "read" else work.view.block(block).writes())[i] for i in indices
        )
        why = f"the target's block {block} does not state that it {kind}s {what}"
        try:
            work.apply(
                "unsafe_hide_buffer_access", why, block=work.block_rv(block), buf_type=kind, buf_index_array=indices
            )
            done = True
        except Refused:
            continue
    return done
