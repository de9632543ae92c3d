"""Regions a block declares by hand (``annotate_buffer_access``): the target's block reads or writes
a buffer over a region it states (annotation ``explicit_read_region`` / ``explicit_write_region``,
the indices of those buffers), not the one TVM infers. The step is read off the target's region, as
ranges over the block's iterators, written as the lambda a person passes (``lambda vi, vj: ((vi - 1,
vi + 2), (vj, vj + 1))``) and read by the trace's safe parser.
"""

from __future__ import annotations

from typing import Any

from mlc_lab.tvm.path.ir import Block, plain
from mlc_lab.tvm.path.work import Work

_KEYS = {"explicit_read_region": "read", "explicit_write_region": "write"}


def explicit_regions(work: Work, name: str, here: Block, target: Block) -> bool:
    """Apply ``annotate_buffer_access`` for each region the target's block states and the block here
    does not; True when any was applied (the block's annotations are then read again)."""
    from mlc_lab.tvm.state_trace import index_lambda

    applied = False
    for key, kind in _KEYS.items():
        want = _indices(target.block.annotations.get(key))
        have = _indices(here.block.annotations.get(key))
        regions = target.block.reads if kind == "read" else target.block.writes
        for index in want:
            if index >= len(regions):
                continue
            text = _lambda(target, regions[index])
            if index in have:  # stated here too: stated again where the target states another region
                mine = here.block.reads if kind == "read" else here.block.writes
                if index >= len(mine) or _lambda(here, mine[index]) == text:
                    continue
            why = f"the target's block {target.name} states the region it {kind}s of {regions[index].source.name}"
            work.apply(
                "annotate_buffer_access",
                why,
                block=work.block_rv(name),
                buffer_index=index,
                buf_type=kind,
                gen_new_ranges=index_lambda(text),
            )
            applied = True
    return applied


def _lambda(block: Block, region: Any) -> str:
    """The region as the lambda over the block's iterators that ``annotate_buffer_access`` takes."""
    params = [str(iv.var.name) for iv in block.block.iter_vars]
    ranges = ", ".join(f"({r.min}, {r.min + r.extent})" for r in region.region)
    return f"lambda {', '.join(params)}: ({ranges}{',' if len(region.region) == 1 else ''})"


def _indices(value: Any) -> list[int]:
    value = plain(value) if value is not None else []
    return [value] if isinstance(value, int) else [int(v) for v in value]
