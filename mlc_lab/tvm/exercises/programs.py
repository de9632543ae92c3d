"""Exercise 3's programs (its starting ``MyBmmRelu`` and the ``TargetModule`` it is scheduled
towards), read from the course catalog, ``mlc_lab/tvm/course_programs.py``, where their text lives.

Kept as a name for the exercises' grader (``mlc_lab/exercises``), which imports them from here.
"""

from mlc_lab.tvm.course_programs import BMM_RELU, BMM_RELU_TARGET

__all__ = ["BMM_RELU", "BMM_RELU_TARGET"]
