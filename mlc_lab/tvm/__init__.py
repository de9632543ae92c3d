"""The one door to TVM: every ``import tvm`` of mlc_lab lives in this package.

TVM renames things between releases (0.26/0.27 moved ``tir`` to ``tirx``/``s_tir`` and ``block``
to ``sblock``); when it moves again, this package is the only place to change.
"""

from mlc_lab._threads import ensure_tvm_threads

ensure_tvm_threads()
