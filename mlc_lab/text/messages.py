"""First lines in plain words for the schedule errors students hit most.

TVM's own text stays in the error's detail; this only adds the sentence a person reads first.
The patterns match TVM 0.27's wording; an unknown message falls back to TVM's ``Error message:``.
"""

from __future__ import annotations

import re

_VERB = {"vectorize": "vectorized", "parallel": "parallelized", "unroll": "unrolled", "bind": "bound to a thread"}


def _names(involved: list[str], default: str) -> str:
    return ", ".join(involved) if involved else default


def _not_under(involved: list[str], role: str, count: int, listed: str) -> str:
    # TVM lists every required block, not only the ones outside the loop
    names = list(dict.fromkeys(re.findall(r"block (\w+)", listed)))
    loop = f"loop {involved[1]}" if len(involved) > 1 else "the target loop"
    if len(names) == 1:
        return (
            f"{_first(involved, 'the block')} cannot move under {loop}: its {role} {names[0]} is not under "
            f"that loop; pick a loop that encloses it too, or move it there first"
        )
    every = f"its {role}s ({', '.join(names)})" if names else f"its {role}s"
    return (
        f"{_first(involved, 'the block')} cannot move under {loop}: {every} must all be under that loop, and "
        f"{count} {'is' if count == 1 else 'are'} not; pick a loop that encloses them, or move them there first"
    )


def _index_range(n: int) -> str:
    return "0" if n == 1 else f"0..{n - 1}"


def _first(involved: list[str], default: str) -> str:
    return involved[0] if involved else default


_RULES: list[tuple[re.Pattern[str], object]] = [
    (
        re.compile(r"stmt2ref"),
        lambda p, inv, m: (
            f"{_first(inv, 'the block')} cannot be scheduled: TVM cannot reach it (it is inside another "
            "block's init, as blockize leaves it)"
        ),
    ),
    (
        re.compile(r"not in a chain"),
        lambda p, inv, m: (
            f"the loops are not in one chain ({_names(inv, 'these loops')} are not nested one inside another)"
        ),
    ),
    (
        re.compile(r"not a data parallel block iter"),
        lambda p, inv, m: f"{_first(inv, 'the loop')} is a reduction loop and cannot be {_VERB.get(p, p)}",
    ),
    (
        re.compile(r"is an output block"),
        lambda p, inv, m: (
            f"{_first(inv, 'the block')} is an output block: compute_at cannot move it under another block's loop "
            "(use reverse_compute_at for a consumer)"
        ),
    ),
    (
        re.compile(r"product of factors is not larger than or equal to the extent"),
        lambda p, inv, m: f"the split factors multiply to less than the extent of {_first(inv, 'the loop')}",
    ),
    (
        re.compile(r"Only one factor can be specified as -1 or none", re.I),
        lambda p, inv, m: "only one split factor may be None (the one TVM infers)",
    ),
    (
        re.compile(r"Cannot find a block with the name: (\S+)"),
        lambda p, inv, m: f"there is no block named {m.group(1)}",
    ),
    (
        re.compile(r"can't be fused because the outer loop"),
        lambda p, inv, m: f"{_names(inv, 'the loops')} cannot be fused: each loop must directly contain the next one",
    ),
    (
        re.compile(r"has init statement"),
        lambda p, inv, m: f"{_first(inv, 'the block')} is a reduction (it has an init) and cannot be inlined",
    ),
    (
        re.compile(r"only a single producer block, and the producer block should be a complete block"),
        lambda p, inv, m: (
            f"{_first(inv, 'the block')} cannot be inlined into its producer: the producer must be a single "
            "complete block (not a reduction)"
        ),
    ),
    (
        re.compile(r"does not have compact dataflow"),
        lambda p, inv, m: (
            f"{p} needs every block under {_first(inv, 'the loop')} to be complete or a reduction with its "
            "init; after decompose_reduction it is neither (apply it before decompose_reduction)"
        ),
    ),
    (
        re.compile(r"is expected to be written by single block, but got (\d+)"),
        lambda p, inv, m: f"the buffer is written by {m.group(1)} blocks; {p} needs a buffer written by one block",
    ),
    (
        re.compile(r"The loop no longer exists"),
        lambda p, inv, m: "that loop no longer exists in the program (an earlier step replaced it)",
    ),
    (
        re.compile(r"is not a leaf block|requires the block to be a leaf", re.I),
        lambda p, inv, m: f"{_first(inv, 'the block')} is not a leaf block",
    ),
    (
        re.compile(r"not required to be.*?affine|binding is not affine|not affine", re.I),
        lambda p, inv, m: f"{p} needs affine loop bindings, and {_names(inv, 'the block')} does not have them",
    ),
    (
        re.compile(r"is not a reduction block|not a reduction block", re.I),
        lambda p, inv, m: f"{_first(inv, 'the block')} is not a reduction block",
    ),
    (
        re.compile(r"loop .* is not a single-branch|not single-branch|has multiple children", re.I),
        lambda p, inv, m: f"{_names(inv, 'the loop')} has more than one statement inside; {p} needs a single branch",
    ),
    (
        re.compile(
            r"has (\d+) (read|write) regions, so `buffer_index` is required to be in \[0, \d+\)\. "
            r"However, the input `buffer_index` is (-?\d+)"
        ),
        lambda p, inv, m: (
            f"{_first(inv, 'the block')} has {m.group(1)} {m.group(2)} buffer{'s' if m.group(1) != '1' else ''}, "
            f"so the buffer index must be {_index_range(int(m.group(1)))}, not {m.group(3)}"
        ),
    ),
    (
        re.compile(r"required not to be touched by any data parallel block iter"),
        lambda p, inv, m: (
            f"{_first(inv, 'the loop')} is used by a data-parallel iterator of the block below it; rfactor needs "
            "a loop that only the reduction iterators use (a part of the split reduction loop)"
        ),
    ),
    (
        re.compile(
            r"requires all the (consumer|producer)\(s\) of the given block to be present under the target "
            r"loop.*?there are (\d+) \w+\(s\) not satisfying.*?List of the \w+\(s\):(.*)",
            re.S,
        ),
        lambda p, inv, m: _not_under(inv, m.group(1), int(m.group(2)), m.group(3)),
    ),
    (
        re.compile(r"thread_axis|Unknown thread|thread tag", re.I),
        lambda p, inv, m: "that is not a known thread axis (use blockIdx.x/y/z, threadIdx.x/y/z, vthread.x/y/z)",
    ),
]


_DATA_PARALLEL_ONLY = ("vectorize", "parallel")


def plain_summary(primitive: str, detail: str, involved: list[str], reduction_loop: bool = False) -> str:
    """The first line of a failed step. ``reduction_loop``: the loop the step was given binds a
    reduction iterator of a block below it (vectorize and parallel can never apply to it, whichever
    check of TVM's refused it first; after decompose_reduction that is the compact-dataflow one)."""
    if reduction_loop and primitive in _DATA_PARALLEL_ONLY:
        return (
            f"{primitive} failed: {_first(involved, 'the loop')} is a reduction loop and cannot be "
            f"{_VERB[primitive]} (only data-parallel loops can)"
        )
    for pattern, make in _RULES:
        m = pattern.search(detail)
        if m:
            return f"{primitive} failed: {make(primitive, involved, m)}"  # type: ignore[operator]
    return f"{primitive} failed: {_tvm_message(detail)}"


def _tvm_message(detail: str) -> str:
    marker = "Error message:"
    if marker in detail:
        tail = detail.split(marker, 1)[1].strip()
        return tail.splitlines()[0] if tail else "TVM rejected the step"
    lines = [ln.strip() for ln in detail.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "Error" in ln or "error" in ln or "Check failed" in ln:
            return ln
    return lines[-1] if lines else "TVM rejected the step"
