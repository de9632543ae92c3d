"""A GPU lab: the course's 1024^3 matmul (P23, chapter 6) and a gemm + relu + add at 2048^3.

Each submission is a list of schedule steps ``(primitive, args, kwargs)`` with the names a student
sees; ``apply(session, steps)`` replays them through ``Session.apply``. ``EXPECTED`` says, for
each submission, which checks fail and which hazards it has (everything else must pass).
"""

from __future__ import annotations

from mlc_lab.tvm.course_programs import PROGRAMS

# The lab's own program (the course has no gemm + relu + add): it stays with the lab.
GEMM_RELU_ADD = """
from tvm.script import ir as I
from tvm.script import tirx as T


@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((2048, 2048), "float32"), B: T.Buffer((2048, 2048), "float32"),
             C: T.Buffer((2048, 2048), "float32"), D: T.Buffer((2048, 2048), "float32")):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        Y = T.sblock_alloc_buffer((2048, 2048), dtype="float32")
        for i, j, k in T.grid(2048, 2048, 2048):
            with T.sblock("gemm"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(2048, 2048):
            with T.sblock("relu_add"):
                vi, vj = T.axis.remap("SS", [i, j])
                D[vi, vj] = T.max(Y[vi, vj], T.float32(0)) + C[vi, vj]
"""

# The course's MyModuleMatmul (P23, chapter 6), from the course catalog.
MATMUL_1024 = PROGRAMS["gpu_matmul"].text


def _steps_gemm(
    *,
    ty=16,
    tx=16,
    ly=4,
    lx=4,
    tk=16,
    copy=(16, 16),
    vec=4,
    order="ij",
    write_back="j_1",
    shared=(0, 1),
    cooperative=True,
    swap_copy=False,
    write_cache=True,
    epilogue="inline",
    blocks=True,
    racing=False,
) -> list:
    """The gemm + relu + add schedule with the knobs a submission turns (defaults: the reference)."""
    s = []
    if write_cache:
        s.append(("cache_write", ("gemm", 0, "local"), {}))
    s += [
        ("split", ("gemm/i", [None, ty, ly]), {}),
        ("split", ("gemm/j", [None, tx, lx]), {}),
        ("split", ("k", [None, tk]), {}),
    ]
    inner = ["i_2", "j_2"] if order == "ij" else ["j_2", "i_2"]
    outer = ["i_0", "j_0"] if order == "ij" else ["j_0", "i_0"]
    if blocks:
        s.append(("reorder", (outer + ["i_1", "j_1", "k_0", "k_1"] + inner,), {}))
        s += [("bind", (outer[0], "blockIdx.y"), {}), ("bind", (outer[1], "blockIdx.x"), {})]
    else:  # one thread block walks every tile in turn: the tile loops stay serial inside the threads
        s.append(("reorder", (["i_1", "j_1"] + outer + ["k_0", "k_1"] + inner,), {}))
    s += [("bind", ("i_1", "threadIdx.y"), {}), ("bind", ("j_1", "threadIdx.x"), {})]
    if write_cache and not blocks:
        s.append(("reverse_compute_at", ("Y_local", outer[1]), {}))
        if epilogue == "inline":
            s.append(("reverse_compute_inline", ("relu_add",), {}))
    elif write_cache:
        if racing:
            # the write-back above the thread loops, bound to threads in another mapping than the compute
            s += [
                ("reverse_compute_at", ("Y_local", "j_0"), {}),
                ("split", ("Y_local/ax0", [ty, ly]), {}),
                ("split", ("Y_local/ax1", [lx, tx]), {}),
                ("reorder", (["Y_local/ax0_0", "Y_local/ax1_1", "Y_local/ax0_1", "Y_local/ax1_0"],), {}),
                ("bind", ("Y_local/ax0_0", "threadIdx.y"), {}),
                ("bind", ("Y_local/ax1_1", "threadIdx.x"), {}),
            ]
        else:
            s.append(("reverse_compute_at", ("Y_local", write_back), {}))
        if epilogue == "inline":
            s.append(("reverse_compute_inline", ("relu_add",), {}))
    elif epilogue == "inline":
        s.append(("reverse_compute_at", ("relu_add", "j_1"), {}))
    if epilogue == "kernel":
        s += [
            ("fuse", ("relu_add/i", "relu_add/j"), {}),
            ("split", ("i_j_fused", [None, 256]), {}),
            ("bind", ("i_j_fused_0", "blockIdx.x"), {}),
            ("bind", ("i_j_fused_1", "threadIdx.x"), {}),
        ]
    for idx in shared:
        name = "A_shared" if idx == 0 else "B_shared"
        s += [("cache_read", ("gemm", idx, "shared"), {}), ("compute_at", (name, "k_0"), {})]
        if cooperative:
            s.append(("fuse", (f"{name}/ax0", f"{name}/ax1"), {}))
            cy, cx = ("threadIdx.x", "threadIdx.y") if swap_copy else ("threadIdx.y", "threadIdx.x")
            s += [
                ("split", (f"{name}/ax0_ax1_fused", [None, copy[0], copy[1], vec]), {}),
                ("vectorize", (f"{name}/ax0_ax1_fused_3",), {}),
                ("bind", (f"{name}/ax0_ax1_fused_1", cy), {}),
                ("bind", (f"{name}/ax0_ax1_fused_2", cx), {}),
            ]
    s += [("decompose_reduction", ("gemm", "k_0"), {}), ("unroll", ("k_1",), {})]
    return s


def _steps_matmul_course(
    tile_local_y=8, tile_local_x=8, tile_block_y=8, tile_block_x=8, tile_k=8, shared=True, write_cache=True
) -> list:
    """The course's ``blocking_with_shared`` (and ``blocking`` with shared=False) as steps."""
    s = [("cache_write", ("C", 0, "local"), {})] if write_cache else []
    s += [
        ("split", ("i", [None, tile_block_y, tile_local_y]), {}),
        ("split", ("j", [None, tile_block_x, tile_local_x]), {}),
        ("split", ("k", [None, tile_k]), {}),
        ("reorder", (["i_0", "j_0", "i_1", "j_1", "k_0", "k_1", "i_2", "j_2"],), {}),
    ]
    if write_cache:
        s.append(("reverse_compute_at", ("C_local", "j_1"), {}))
    s += [("bind", ("i_0", "blockIdx.y"), {}), ("bind", ("j_0", "blockIdx.x"), {})]
    if not shared:
        s += [("unroll", ("k_1",), {}), ("bind", ("i_1", "threadIdx.y"), {}), ("bind", ("j_1", "threadIdx.x"), {})]
    else:
        nthread = tile_block_y * tile_block_x
        s += [("fuse", ("i_1", "j_1"), {}), ("bind", ("i_1_j_1_fused", "threadIdx.x"), {})]
        for idx, name in ((0, "A_shared"), (1, "B_shared")):
            s += [
                ("cache_read", ("C", idx, "shared"), {}),
                ("compute_at", (name, "k_0"), {}),
                ("fuse", (f"{name}/ax0", f"{name}/ax1"), {}),
                ("split", (f"{name}/ax0_ax1_fused", [None, nthread, 4]), {}),
                ("vectorize", (f"{name}/ax0_ax1_fused_2",), {}),
                ("bind", (f"{name}/ax0_ax1_fused_1", "threadIdx.x"), {}),
            ]
    s.append(("decompose_reduction", ("C", "k_0"), {}))
    return s


# name -> (program, steps)
SUBMISSIONS: dict[str, tuple[str, list]] = {
    # gemm + relu + add, 2048^3
    "reference": (GEMM_RELU_ADD, _steps_gemm()),
    "variant_8x8_threads_8x8_tile": (GEMM_RELU_ADD, _steps_gemm(ty=8, tx=8, ly=8, lx=8, tk=8, copy=(8, 8))),
    "variant_128_block_tk8": (GEMM_RELU_ADD, _steps_gemm(ty=16, tx=16, ly=8, lx=8, tk=8, copy=(16, 16))),
    "variant_ji_order": (GEMM_RELU_ADD, _steps_gemm(order="ji", tk=32, copy=(16, 16), vec=2)),
    "no_shared": (GEMM_RELU_ADD, _steps_gemm(shared=())),
    "only_a_shared": (GEMM_RELU_ADD, _steps_gemm(shared=(0,))),
    "copy_by_every_thread": (GEMM_RELU_ADD, _steps_gemm(cooperative=False)),
    "copy_uncoalesced": (GEMM_RELU_ADD, _steps_gemm(swap_copy=True)),
    "no_register_tile": (GEMM_RELU_ADD, _steps_gemm(ly=1, lx=1, copy=(16, 16), vec=1)),
    "no_thread_blocks": (GEMM_RELU_ADD, _steps_gemm(blocks=False)),
    "no_write_cache": (GEMM_RELU_ADD, _steps_gemm(write_cache=False)),
    "write_back_in_reduction": (GEMM_RELU_ADD, _steps_gemm(write_back="k_0")),
    "epilogue_own_kernel": (GEMM_RELU_ADD, _steps_gemm(epilogue="kernel")),
    "racing_write_back": (GEMM_RELU_ADD, _steps_gemm(racing=True)),
    "copy_8x32_threads": (GEMM_RELU_ADD, _steps_gemm(copy=(8, 32))),
    # the course's matmul, 1024^3
    "course_blocking_with_shared": (MATMUL_1024, _steps_matmul_course()),
    "course_blocking": (MATMUL_1024, _steps_matmul_course(shared=False)),
    "course_no_write_cache": (MATMUL_1024, _steps_matmul_course(write_cache=False)),
}

# name -> (checks that fail, hazard kinds)
EXPECTED: dict[str, tuple[set, set]] = {
    "reference": (set(), set()),
    "variant_8x8_threads_8x8_tile": (set(), set()),
    "variant_128_block_tk8": (set(), set()),
    "variant_ji_order": (set(), set()),
    "no_shared": ({"shared_memory_tiling"}, set()),
    "only_a_shared": ({"shared_memory_tiling"}, set()),
    "copy_by_every_thread": ({"cooperative_fetching"}, set()),
    "copy_uncoalesced": ({"cooperative_fetching"}, set()),
    "no_register_tile": ({"register_tiling"}, set()),
    "no_thread_blocks": ({"thread_block_tiling"}, set()),
    # Y, now written in global memory, is used only inside the kernel: TVM cannot allocate it there
    # ... and with the accumulator in global memory, no thread keeps a tile in registers
    "no_write_cache": ({"write_cache", "register_tiling"}, {"allocation"}),
    "write_back_in_reduction": ({"write_cache"}, set()),
    "epilogue_own_kernel": ({"epilogue_fusion"}, set()),
    # TVM sizes the accumulator for the write-back's whole tile per thread: it spills too; and write_cache
    # says the write-back's loops give a thread elements another thread computed (issue 34)
    "racing_write_back": ({"write_cache"}, {"race", "spill"}),
    "copy_8x32_threads": (set(), {"thread_extent", "out_of_bounds"}),
    "course_blocking_with_shared": (set(), set()),
    "course_blocking": ({"shared_memory_tiling"}, set()),
    "course_no_write_cache": ({"write_cache", "register_tiling"}, set()),
}


def apply(session, steps: list) -> None:
    for primitive, args, kwargs in steps:
        session.apply(primitive, *args, **kwargs)


def session_of(name: str):
    from mlc_lab.core.session import Session

    program, steps = SUBMISSIONS[name]
    session = Session(program)
    apply(session, steps)
    return session
