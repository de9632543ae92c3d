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


def load(src, func=None):
    """An IRModule from an IRModule, a PrimFunc, TVMScript text (legacy spelling too) or a .py path."""
    from mlc_lab.tvm.program import load as _load

    return _load(src, func)


def convert(code: str) -> str:
    """Rewrite the MLC course's legacy TVM code so that it runs on the pinned TVM."""
    from mlc_lab.text.compat import convert as _convert

    return _convert(code)


def __getattr__(name: str):
    # Heavy parts (TVM, widgets) load on first use, so `import mlc_lab` stays cheap.
    if name == "Session":
        from mlc_lab.core.session import Session

        import mlc_lab.widgets  # noqa: F401  (registers s.view(), s.access_view() and the notebook display)

        return Session
    if name == "Sampled":
        from mlc_lab.core.session import Sampled

        return Sampled
    if name == "explore":
        from mlc_lab.widgets.explorer import explore

        return explore
    if name == "access_view":
        from mlc_lab.widgets.access.view import access_view

        return access_view
    if name in ("course_program", "course_programs", "open_trace", "open_tuning_run"):
        from mlc_lab import documents

        return getattr(documents, name)
    if name == "dashboard":
        from mlc_lab.widgets.tuning import dashboard

        return dashboard
    if name in ("tune", "TuneJob"):
        from mlc_lab.core import tuning

        return getattr(tuning, name)
    if name in ("measure", "time_callable"):
        from mlc_lab.core import measure

        return getattr(measure, name)
    if name == "machine":
        from mlc_lab.core.machine import machine

        return machine
    if name in ("leaderboard", "class_dashboard"):
        from mlc_lab.widgets import classroom

        return getattr(classroom, name)
    if name == "sweep":
        from mlc_lab.widgets.measure import sweep

        return sweep
    raise AttributeError(f"module 'mlc_lab' has no attribute {name!r}")


__all__ = [
    "ConvertError",
    "DecisionError",
    "LoadError",
    "MlcLabError",
    "NameResolutionError",
    "ScheduleStepError",
    "TraceParseError",
    "Session",
    "__version__",
    "access_view",
    "class_dashboard",
    "dashboard",
    "explore",
    "leaderboard",
    "machine",
    "measure",
    "sweep",
    "time_callable",
    "tune",
    "convert",
    "load",
]
