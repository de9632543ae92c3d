"""A CPU lab on the course's mm_relu (chapter 2, 128x128): a reference schedule, a correct variant and
submissions that each leave out one optimisation. Same shape as ``gpu_matmul``."""

from __future__ import annotations

from mlc_lab.tvm.course_programs import MM_RELU


def _pack(k, j):  # B[k, j] -> B_global[j // 8, k, j % 8]: the inner loop over j reads it contiguously
    return (j // 8, k, j % 8)


def _steps(
    *, jf=8, kf=4, order="k_inside", parallel=True, vectorize="Y", unroll=True, decompose=True, pack=True
) -> list:
    s = [("split", ("Y/j", [None, jf]), {}), ("split", ("k", [None, kf]), {})]
    if order == "k_inside":
        s.append(("reorder", (["Y/i", "Y/j_0", "k_0", "k_1", "Y/j_1"],), {}))
    else:
        s.append(("reorder", (["Y/i", "Y/j_0", "k_0", "Y/j_1", "k_1"],), {}))
    s.append(("reverse_compute_at", ("C", "Y/j_0"), {}))
    if parallel:
        s.append(("parallel", ("Y/i",), {}))
    if pack:
        s += [("cache_read", ("Y", 1, "global"), {}), ("transform_layout", ("Y", ("read", 1), _pack), {})]
    if vectorize == "Y":
        s.append(("vectorize", ("Y/j_1",), {}))
    elif vectorize == "C":
        s.append(("vectorize", ("C/ax0",), {}))
    if decompose:
        s.append(("decompose_reduction", ("Y", "k_0"), {}))
    if unroll:
        s.append(("unroll", ("k_1",), {}))
    return s


SUBMISSIONS: dict[str, tuple[str, list]] = {
    "reference": (MM_RELU, _steps()),
    "variant_16_wide": (MM_RELU, _steps(jf=16, kf=8, vectorize="C")),
    "no_parallel": (MM_RELU, _steps(parallel=False)),
    "no_vectorize": (MM_RELU, _steps(vectorize=None)),
    "no_unroll": (MM_RELU, _steps(unroll=False)),
    "no_decompose": (MM_RELU, _steps(decompose=False)),
    "no_packing": (MM_RELU, _steps(pack=False)),
    "k_innermost": (MM_RELU, _steps(order="k_last", vectorize="C")),
}

EXPECTED: dict[str, set] = {
    "reference": set(),
    "variant_16_wide": set(),
    "no_parallel": {"parallel"},
    "no_vectorize": {"vectorize"},
    "no_unroll": {"unroll"},
    "no_decompose": {"reduction_init"},
    "no_packing": {"packing"},
    "k_innermost": {"loop_order"},
}


def session_of(name: str):
    from mlc_lab.core.session import Session

    program, steps = SUBMISSIONS[name]
    session = Session(program)
    for primitive, args, kwargs in steps:
        session.apply(primitive, *args, **kwargs)
    return session
