"""mlc_lab: interactive exploration of TVM TensorIR schedules."""

from mlc_lab._threads import ensure_tvm_threads

ensure_tvm_threads()  # before anything below can start TVM's thread pool

from mlc_lab.errors import (  # noqa: E402
    ConvertError,
    DecisionError,
    LoadError,
    MlcLabError,
    NameResolutionError,
    ScheduleStepError,
    TraceParseError,
)

__version__ = "0.1.0"

__all__ = [
    "ConvertError",
    "DecisionError",
    "LoadError",
    "MlcLabError",
    "NameResolutionError",
    "ScheduleStepError",
    "TraceParseError",
    "__version__",
]
