"""How a tuning job builds its candidates: in its own process, on a few threads, each linked into a
shared library right away (see `InProcessBuilder`), with TVMScript's costly `inspect.stack()` calls
made cheap for the job's process (`install_fast_stack`)."""

from __future__ import annotations

import linecache
import os
import shutil
import subprocess
import sys
import tempfile
from typing import TYPE_CHECKING, Any

import tvm
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms

from mlc_lab._threads import usable_cores
from mlc_lab.tvm import timeline

if TYPE_CHECKING:
    from mlc_lab.tvm.tuning import LiveLog


class _FrameInfo:
    """Just what TVMScript's parser reads from `inspect.stack()`, with the source line loaded lazily."""

    __slots__ = ("frame", "filename", "lineno", "function", "index")

    def __init__(self, frame: Any) -> None:
        self.frame = frame
        self.filename = frame.f_code.co_filename
        self.lineno = frame.f_lineno
        self.function = frame.f_code.co_name
        self.index = 0

    @property
    def code_context(self) -> list[str] | None:
        line = linecache.getline(self.filename, self.lineno)
        return [line] if line else None


class _FastInspect:
    """A stand-in for the `inspect` module whose `stack()` does not read every source file."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def stack(self, context: int = 1) -> list:  # noqa: ARG002 - same signature as inspect.stack
        frames = []
        frame = sys._getframe(1)
        while frame is not None:
            frames.append(_FrameInfo(frame))
            frame = frame.f_back
        return frames


def install_fast_stack() -> None:
    """TVMScript's decorators call `inspect.stack()`, which costs ~20 ms each and ~10 s for the 496
    tensor intrinsics meta_schedule imports. Subprocess only: it patches TVM internals."""
    import importlib
    import inspect

    for name in ("tvm.tirx.script.parser.entry", "tvm.script.parser.ir.entry"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if getattr(module, "inspect", None) is inspect:
            module.inspect = _FastInspect(inspect)


def fast_build(mod: Any, target: Any, _params: Any = None) -> Any:
    """meta_schedule's default_build without its `import tvm.s_tir.tensor_intrin` (seconds per call)."""
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm.tirx.build(mod, target=target)


def _link_shared(output: str, objects: list, options: Any = None, **_kwargs: Any) -> None:
    """`export_library`'s linking step by `ld -shared` itself. TVM's default runs the `g++`
    driver, which starts collect2 and ld and adds the C++ start files and libraries: 0.05 CPU-s
    and 0.1 s of wall time per candidate here, against 0.01 s. The kernel's machine code is the
    object's either way (the disassembly of every function is identical); the shared library just
    lacks the empty _init/_fini and the DT_NEEDED entries for libraries the loading process
    already has. Falls back to TVM's own link when `ld` is missing or fails."""
    objects = [objects] if isinstance(objects, str) else list(objects)
    if _LD is not None:
        cmd = [_LD, "-shared", "-o", output, *objects]
        if subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
            return
    from tvm.support import cc

    cc.create_shared(output, objects, options)


_link_shared.output_format = "so"  # type: ignore[attr-defined]  (what export_library asks of an fcompile)
_LD = shutil.which("ld") if sys.platform.startswith("linux") else None


def export_shared(rt_mod: Any) -> str:
    """The candidate as a shared library, linked here, on the builder's threads. meta_schedule's
    default_export writes a tar of object files instead, which the runner must unpack and link
    before it can time anything: 0.1-0.25 s per candidate spent in the one-at-a-time measuring
    phase, against 0.05-0.1 s more here, where two candidates build at once. The directory is
    removed by meta_schedule's RemoveBuildArtifact callback, as the tar's was."""
    path = os.path.join(tempfile.mkdtemp(prefix="mlc_lab_cand_"), "candidate.so")
    rt_mod.export_library(path, fcompile=_link_shared)
    return path


@derived_object
class InProcessBuilder(ms.builder.PyBuilder):
    """Builds candidates in the tuning process itself, on a few threads (TVM's FFI calls release
    the GIL, so LLVM code generation runs in parallel). The stock LocalBuilder starts fresh worker
    processes on every batch, which costs seconds each time."""

    def __init__(self, max_workers: int | None = None, live: "LiveLog | None" = None) -> None:
        super().__init__()
        self.max_workers = max_workers or usable_cores()
        self.live = live

    def build(self, build_inputs: list) -> list:
        if self.live is not None:
            self.live.phase("building", len(build_inputs))
        from concurrent.futures import ThreadPoolExecutor

        from tvm.s_tir.meta_schedule.builder import BuilderResult

        def compile_one(item: Any) -> str:
            with timeline.span("lower_codegen"):
                rt_mod = fast_build(item.mod, item.target, None)
            with timeline.span("export"):
                return export_shared(rt_mod)

        def one(item: Any) -> Any:
            try:
                return BuilderResult(compile_one(item), None)
            except Exception as exc:  # noqa: BLE001 - a failed candidate is a result, not a crash
                return BuilderResult(None, f"build failed: {exc}")

        with timeline.span("build_batch", n=len(build_inputs)):
            if self.max_workers <= 1 or len(build_inputs) <= 1:
                return [one(item) for item in build_inputs]
            with ThreadPoolExecutor(max_workers=self.max_workers) as pool:
                return list(pool.map(one, build_inputs))
