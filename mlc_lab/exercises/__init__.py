"""Graders for the MLC course's TensorIR exercises (chapter 2), with reports a student can act on.

>>> from mlc_lab import exercises
>>> exercises.check_broadcast_add(MyAdd)          # numeric check against numpy
>>> exercises.check_conv(MyConv)
>>> exercises.check_bmm_relu(sch)                 # numbers, then how far the schedule is from the target
>>> exercises.compare_structure(mine, target)     # the structural part alone, for any two programs

Every grader returns a :class:`GradeReport`: ``passed``, one line per check, and for the schedule
exercise the way to the target (``Session.path_to``, the engine the explorer's hints use too): one
difference per step, where it acts, what of the target it makes, and the primitive itself. It renders as HTML in a notebook and as text with
``print``. Programs may be an IRModule, a PrimFunc, a ``tvm.s_tir.Schedule``, a
:class:`mlc_lab.Session` or TVMScript text (the course's legacy spelling too).

The graders live in ``course.py`` (the exercises), ``numeric.py`` (the numeric check against numpy),
``structure.py`` (the way to a target) and ``report.py`` (how a report reads); this package gives their
public names. It imports no TVM itself: the loop structure comes from :meth:`Session.loop_tree`, and
building, running and TVM's structural equality from :mod:`mlc_lab.tvm.exercises` (running in a
child process, so a broken program cannot take the kernel down).
"""

from __future__ import annotations

from mlc_lab.exercises.course import (
    check_add,
    check_bmm_relu,
    check_broadcast_add,
    check_conv,
    conv2d_reference,
)
from mlc_lab.exercises.numeric import RUN_TIMEOUT_S, numeric_check, run_function
from mlc_lab.exercises.report import Check, Difference, GradeReport
from mlc_lab.exercises.structure import compare_structure
from mlc_lab.tvm.exercises.programs import BMM_RELU, BMM_RELU_TARGET

__all__ = [
    "Check",
    "Difference",
    "GradeReport",
    "check_add",
    "check_broadcast_add",
    "check_conv",
    "check_bmm_relu",
    "compare_structure",
    "conv2d_reference",
    "numeric_check",
    "run_function",
    "RUN_TIMEOUT_S",
    "BMM_RELU",
    "BMM_RELU_TARGET",
]
