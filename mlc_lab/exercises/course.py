"""The course's TensorIR exercises (chapter 2), each a grader: its inputs, numpy's answer, and for the
schedule exercise the course's target.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mlc_lab.exercises.numeric import numeric_check
from mlc_lab.exercises.report import GradeReport
from mlc_lab.exercises.structure import compare_structure
from mlc_lab.tvm.exercises.programs import BMM_RELU, BMM_RELU_TARGET


def check_add(program: Any) -> GradeReport:
    """The worked example: ``C[i, j] = A[i, j] + B[i, j]`` on 4x4 int64."""
    a = np.arange(16, dtype=np.int64).reshape(4, 4)
    b = np.arange(16, 0, -1, dtype=np.int64).reshape(4, 4)
    c = np.zeros((4, 4), dtype=np.int64)
    return numeric_check(program, "add", [a, b, c], a + b, exercise="Example: element-wise add")


def check_broadcast_add(program: Any) -> GradeReport:
    """Exercise 1: ``C[i, j] = A[i, j] + B[j]``, A (4, 4), B (4,), int64."""
    a = np.arange(16, dtype=np.int64).reshape(4, 4)
    b = np.arange(4, 0, -1, dtype=np.int64)
    c = np.zeros((4, 4), dtype=np.int64)
    return numeric_check(program, "add", [a, b, c], a + b, exercise="Exercise 1: broadcast add")


def conv2d_reference(data: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """NCHW convolution, stride 1, no padding, in numpy (what the course computes with torch)."""
    n, ci, h, w = data.shape
    co, _, kh, kw = weight.shape
    out = np.zeros((n, co, h - kh + 1, w - kw + 1), dtype=np.result_type(data, weight))
    for di in range(kh):
        for dj in range(kw):
            window = data[:, :, di : di + h - kh + 1, dj : dj + w - kw + 1]  # n, ci, oh, ow
            out += np.einsum("nchw,kc->nkhw", window, weight[:, :, di, dj])
    return out


def check_conv(program: Any) -> GradeReport:
    """Exercise 2: 2-D convolution, data (1, 1, 8, 8), weight (2, 1, 3, 3), output (1, 2, 6, 6), int64."""
    data = np.arange(64, dtype=np.int64).reshape(1, 1, 8, 8)
    weight = np.arange(18, dtype=np.int64).reshape(2, 1, 3, 3)
    out = np.zeros((1, 2, 6, 6), dtype=np.int64)
    return numeric_check(
        program, "conv", [data, weight, out], conv2d_reference(data, weight), exercise="Exercise 2: 2-D convolution"
    )


def check_bmm_relu(program: Any, target: Any = None, *, numeric: bool = True, seed: int = 0) -> GradeReport:
    """Exercise 3: the batched matmul + relu, scheduled towards the course's target.

    Checks the numbers against numpy (on seeded random inputs), then compares the loop structure
    with ``target`` (default: the course's ``TargetModule``) and lists every difference.
    """
    rep = GradeReport("Exercise 3: batched matmul + relu")
    if numeric:
        rng = np.random.default_rng(seed)
        # centred on 0, so that about half of Y is negative and the ReLU matters
        a = rng.random((16, 128, 128), dtype=np.float32) - np.float32(0.5)
        b = rng.random((16, 128, 128), dtype=np.float32) - np.float32(0.5)
        c = np.zeros((16, 128, 128), dtype=np.float32)
        expected = np.maximum(np.matmul(a, b), 0)
        numeric_check(program, "bmm_relu", [a, b, c], expected, rtol=1e-4, atol=1e-4, report=rep)
        if not rep.passed:
            return rep
    compare_structure(
        program, BMM_RELU_TARGET if target is None else target, func="bmm_relu", report=rep, start=BMM_RELU
    )
    return rep
