"""How a tuning job builds its candidates: in its own process, on a few threads, each linked into a
shared library right away (see `InProcessBuilder`), with TVMScript's costly `inspect.stack()` calls
made cheap for the job's process (`install_fast_stack`)."""

from __future__ import annotations

import inspect
import itertools
import linecache
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import Future
from typing import Any, Callable

import tvm
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm_ffi import structural_equal, structural_hash

from mlc_lab._threads import usable_cores
from mlc_lab import timeline
from mlc_lab.tvm.tuning.live import LiveLog


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


class FastInspect:
    """A stand-in for the `inspect` module whose `stack()` does not read every source file."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def stack(self, context: int = 1) -> list:  # noqa: ARG002 - same signature as inspect.stack
        frames = []
        frame = inspect.currentframe().f_back  # the caller's frame, as inspect.stack starts
        while frame is not None:
            frames.append(_FrameInfo(frame))
            frame = frame.f_back
        return frames


def install_fast_stack() -> None:
    """TVMScript's decorators call `inspect.stack()`, which costs ~20 ms each and ~10 s for the 496
    tensor intrinsics meta_schedule imports. Subprocess only: it patches TVM internals."""
    import importlib

    for name in ("tvm.tirx.script.parser.entry", "tvm.script.parser.ir.entry"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if getattr(module, "inspect", None) is inspect:
            module.inspect = FastInspect(inspect)


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


def export_shared(rt_mod: Any, target: Any = None) -> str:
    """The candidate as a shared library, linked here, on the builder's threads. meta_schedule's
    default_export writes a tar of object files instead, which the runner must unpack and link
    before it can time anything: 0.1-0.25 s per candidate spent in the one-at-a-time measuring
    phase, against 0.05-0.1 s more here, where two candidates build at once. The directory is
    removed by meta_schedule's RemoveBuildArtifact callback, as the tar's was. A CUDA candidate's
    kernels are compiled here too (`mlc_lab.tvm.measure.artifact`): the machine that times it
    needs TVM's runtime and the GPU driver only."""
    path = os.path.join(tempfile.mkdtemp(prefix="mlc_lab_cand_"), "candidate.so")
    if target is not None and target.kind.name == "cuda":
        from mlc_lab.tvm.measure.artifact import export_artifact

        export_artifact(rt_mod, path, target)
    else:
        rt_mod.export_library(path, fcompile=_link_shared)
    return path


class BuiltCandidates:
    """The shared libraries of one job's candidates, by module, so that a candidate built before
    is not built again.

    A run in stages (`tuning._stages`) starts a new evolutionary search per stage, and a new search
    does not know which candidates the previous ones measured: it seeds its population with the
    database's best and measures many of them again (24 of 64 trials of a 128^3 run were such
    repeats). Each repeat is still measured (that is meta_schedule's trial), but its library is a
    hard link to the one built before (same module, same target: the same code), not a new
    0.2-0.3 CPU-s compile. Two equal candidates in one batch: the second waits for the first."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="mlc_lab_built_")
        self._lock = threading.Lock()
        self._entries: dict[int, list[tuple[Any, Future]]] = {}  # structural hash -> [(module, future of path)]
        self._names = itertools.count()
        self.hits = 0

    def get_or_build(self, mod: Any, target: Any, build: Callable[[], str]) -> str:
        """The path of a fresh artifact directory's library for `mod`: linked to the one built
        before, or built now by `build()` (which returns a library path it owns)."""
        key = structural_hash(mod) ^ hash(str(target))
        with self._lock:
            for other, fut in self._entries.get(key, []):  # noqa: B007  (fut: the one found, after the break)
                if structural_equal(other, mod):
                    break
            else:
                other, fut = None, Future()
                self._entries.setdefault(key, []).append((mod, fut))
        if other is not None:
            kept = fut.result()  # raises the first build's error for its twin too
            self.hits += 1
            timeline.event("build_reused")
            return _link_copy(kept)
        try:
            path = build()
            with self._lock:
                kept = os.path.join(self.dir, f"{next(self._names)}.so")
            _link_or_copy(path, kept)
            fut.set_result(kept)
            return path
        except BaseException as exc:
            fut.set_exception(exc)
            raise

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system
        shutil.copyfile(src, dst)


def _link_copy(kept: str) -> str:
    """A new artifact directory holding `kept`'s library (RemoveBuildArtifact deletes the directory)."""
    path = os.path.join(tempfile.mkdtemp(prefix="mlc_lab_cand_"), "candidate.so")
    _link_or_copy(kept, path)
    return path


@derived_object
class InProcessBuilder(ms.builder.PyBuilder):
    """Builds candidates in the tuning process itself, on a few threads (TVM's FFI calls release
    the GIL, so LLVM code generation runs in parallel). The stock LocalBuilder starts fresh worker
    processes on every batch, which costs seconds each time."""

    def __init__(
        self, max_workers: int | None = None, live: "LiveLog | None" = None, built: BuiltCandidates | None = None
    ) -> None:
        super().__init__()
        self.max_workers = max_workers or usable_cores()
        self.live = live
        self.built = built  # a job's candidates built so far (None: build every one)

    def build(self, build_inputs: list) -> list:
        if self.live is not None:
            self.live.phase("building", len(build_inputs))
        from concurrent.futures import ThreadPoolExecutor

        from tvm.s_tir.meta_schedule.builder import BuilderResult

        def compile_one(item: Any) -> str:
            with timeline.span("lower_codegen"):
                rt_mod = fast_build(item.mod, item.target, None)
            with timeline.span("export"):
                return export_shared(rt_mod, item.target)

        def one(item: Any) -> Any:
            try:
                if self.built is None:
                    return BuilderResult(compile_one(item), None)
                return BuilderResult(self.built.get_or_build(item.mod, item.target, lambda: compile_one(item)), None)
            except Exception as exc:  # noqa: BLE001 - a failed candidate is a result, not a crash
                return BuilderResult(None, f"build failed: {exc}")

        with timeline.span("build_batch", n=len(build_inputs)):
            if self.max_workers <= 1 or len(build_inputs) <= 1:
                return [one(item) for item in build_inputs]
            with ThreadPoolExecutor(max_workers=self.max_workers) as pool:
                return list(pool.map(one, build_inputs))
