"""Tables of ``trace_io``'s parser: how each instruction of TVM's JSON trace maps to the Python API,
and how a refused statement is named to a student."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    """How one instruction of TVM's JSON becomes a call of the Python API.

    ``inputs``/``attrs`` name the Python parameter that each JSON slot feeds, in TVM's order (see the
    ``*Traits`` of src/s_tir/schedule/primitive/*.cc); ``"*name"`` takes all remaining inputs as a list,
    ``"*"`` spreads them as positional arguments.
    """

    primitive: str
    inputs: tuple[str, ...] = ()
    attrs: tuple[str, ...] = ()
    decision: bool = False


def _k(primitive: str, inputs: str = "", attrs: str = "", decision: bool = False) -> Kind:
    return Kind(primitive, tuple(inputs.split()), tuple(attrs.split()), decision)


KINDS: dict[str, Kind] = {
    "Annotate": _k("annotate", "block_or_loop ann_val", "ann_key"),
    "Unannotate": _k("unannotate", "block_or_loop", "ann_key"),
    "AnnotateBufferAccess": _k("annotate_buffer_access", "block buffer_index buf_type gen_new_ranges"),
    "StorageAlign": _k("storage_align", "block", "buffer_index axis factor offset"),
    "SetScope": _k("set_scope", "block", "buffer_index storage_scope"),
    "UnsafeSetDType": _k("unsafe_set_dtype", "block", "buffer_index dtype"),
    "Blockize": _k("blockize", "target", "preserve_unit_iters"),
    "Tensorize": _k("tensorize", "block_or_loop", "tensor_intrin preserve_unit_iters"),
    "CacheIndex": _k("cache_index", "block", "storage_scope cse_thresh"),
    "CacheRead": _k("cache_read", "block consumer_blocks", "read_buffer_index storage_scope"),
    "CacheWrite": _k("cache_write", "block consumer_blocks", "write_buffer_index storage_scope"),
    "CacheInplace": _k("cache_inplace", "block", "read_buffer_index storage_scope"),
    "ReIndex": _k("reindex", "block", "buffer_index buffer_index_type"),
    "ReindexCacheRead": _k("reindex_cache_read", "block index_map", "read_buffer_index storage_scope"),
    "ReindexCacheWrite": _k("reindex_cache_write", "block index_map", "write_buffer_index storage_scope"),
    "ComputeAt": _k("compute_at", "block loop", "preserve_unit_loops index"),
    "ReverseComputeAt": _k("reverse_compute_at", "block loop", "preserve_unit_loops index"),
    "ComputeInline": _k("compute_inline", "block"),
    "ReverseComputeInline": _k("reverse_compute_inline", "block"),
    "FuseReductionEpilogue": _k("fuse_reduction_epilogue", "reduction_block epilogue_block"),
    "DecomposePadding": _k("decompose_padding", "block loop"),
    "Parallel": _k("parallel", "loop"),
    "Vectorize": _k("vectorize", "loop"),
    "Bind": _k("bind", "loop", "thread_axis"),
    "Unroll": _k("unroll", "loop"),
    "GetSBlock": _k("get_sblock", "", "name func_name"),
    "GetLoops": _k("get_loops", "block"),
    "GetChildBlocks": _k("get_child_blocks", "block_or_loop"),
    "GetProducers": _k("get_producers", "block"),
    "GetConsumers": _k("get_consumers", "block"),
    "GetOutputBlocks": _k("get_output_blocks", "scope_block"),
    "UnsafeHideBufferAccess": _k("unsafe_hide_buffer_access", "block buf_type buf_index_array"),
    "TransformLayout": _k(
        "transform_layout", "block index_map", "buffer_index buffer_index_type pad_value assume_injective_transform"
    ),
    "TransformBlockLayout": _k("transform_block_layout", "block", "index_map"),
    "Split": _k("split", "loop *factors", "preserve_unit_iters disable_predication"),
    "LoopPartition": _k("loop_partition", "loop *factors", "preserve_unit_iters"),
    "Merge": _k("merge", "*"),
    "Fuse": _k("fuse", "*", "preserve_unit_iters"),
    "Reorder": _k("reorder", "*"),
    "AddUnitLoop": _k("add_unit_loop", "block_or_loop"),
    "PadEinsum": _k("pad_einsum", "block", "padding"),
    "ReadAt": _k("read_at", "loop block", "read_buffer_index storage_scope"),
    "WriteAt": _k("write_at", "loop block", "write_buffer_index storage_scope"),
    "DecomposeReduction": _k("decompose_reduction", "block loop"),
    "RFactor": _k("rfactor", "loop", "factor_axis"),
    "ReorderBlockIterVar": _k("reorder_block_iter_var", "block new_order"),
    "RollingBuffer": _k("rolling_buffer", "block", "write_buffer_index"),
    "SampleCategorical": _k("sample_categorical", "", "candidates probs", decision=True),
    "SamplePerfectTile": _k("sample_perfect_tile", "loop", "n max_innermost_factor", decision=True),
    "SamplePartitionedTile": _k("sample_partitioned_tile", "loop", "n partition_pos innerpart_factor", decision=True),
    "SampleComputeLocation": _k("sample_compute_location", "block", "", decision=True),
    "EnterPostproc": _k("enter_postproc"),
}
# Python parameters whose JSON attribute is TVM's 0/1 for a bool.
BOOL_ATTRS = {"preserve_unit_iters", "disable_predication", "preserve_unit_loops", "assume_injective_transform"}
NAME = re.compile(r"[blv]\d+|_")


def statement_kind(stmt: ast.stmt) -> str:
    """'an import', 'a for loop', ...: a refused statement named as a student would name it."""
    words = {
        "Import": "an import",
        "ImportFrom": "an import",
        "FunctionDef": "a function definition",
        "AsyncFunctionDef": "a function definition",
        "ClassDef": "a class definition",
        "For": "a for loop",
        "While": "a while loop",
        "If": "an if statement",
        "With": "a with statement",
        "Try": "a try statement",
        "AugAssign": "an augmented assignment",
        "Delete": "a del statement",
        "Global": "a global statement",
        "Return": "a return statement",
        "Raise": "a raise statement",
    }
    name = type(stmt).__name__
    return words.get(name, f"a {name.lower()} statement")


class Ref:
    """A variable defined by a trace being replayed (``l3``, ``v4``): resolved from the replay's names."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name
