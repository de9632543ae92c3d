"""A measurement: one timing of one program, and the one rule that says whether it was taken quietly.

The worker returns it (as its JSON), ``mlc_lab.core.measure`` reads it back with :meth:`Measurement.from_json`,
the Session keeps it per step, and the explorer sends :meth:`Measurement.to_json` to the page unchanged.
``js/lib/model.ts`` is generated from this dataclass (``python -m mlc_lab.core.model_ts``), so a field added
here reaches the page's type; a field whose metadata says :func:`hover` is also listed in the explorer's hover
text (``MEASUREMENT_HOVER`` in the generated file), with no edit on the TypeScript side.

The second half is the measuring side's contract (``mlc_lab.tvm.measure.runside``), a process boundary:
a run elsewhere (the sandbox, a remote GPU machine, a batch job) is asked for by a :class:`RunManifest`
and answers with :class:`RunResults`, each with one ``to_json`` and a strict ``from_json``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from mlc_lab.model.errors import ErrorKind

__all__ = [
    "CandidateResult",
    "Measurement",
    "PARALLEL_FLOOR",
    "QUIET_CORES",
    "RUN_DEVICES",
    "RUN_ERRORS",
    "RUN_FORMAT",
    "STEADY_SPREAD",
    "RunArg",
    "RunCandidate",
    "RunError",
    "RunFormatError",
    "RunManifest",
    "RunMethod",
    "RunResults",
    "SpeedProbe",
    "hover",
    "pack_files",
    "quiet",
    "spread",
    "unpack_files",
]
# What js/lib/model.ts gets of this module, in order (python -m mlc_lab.core.model_ts).
WIRE = ("Measurement",)

QUIET_CORES = 0.25  # below this, a measurement counts as taken on a quiet machine
PARALLEL_FLOOR = 0.8  # and with at least this share of its cores' speed (mlc_lab.tvm.machine.parallel_speed)
# and steady: the repeats' interquartile range at most this share of their median. A figure whose
# own repeats spread wider was disturbed by something no other probe saw (on this project's VM: a
# 512^3 kernel's repeats with a median of 2.85 ms and an interquartile range of 1.64 ms within one
# 0.2 s measurement, others_cores 0.10, parallel_speed 1.0).
STEADY_SPREAD = 0.10
# The thresholds the page words its hover text by; written into js/lib/model.ts.
CONSTANTS = {"QUIET_CORES": QUIET_CORES, "PARALLEL_FLOOR": PARALLEL_FLOOR, "STEADY_SPREAD": STEADY_SPREAD}


def spread(iqr_s: float | None, median_s: float | None) -> float | None:
    """The repeats' interquartile range over their median (None: not known)."""
    if iqr_s is None or not median_s:
        return None
    return iqr_s / median_s


def quiet(cores: float | None, parallel_speed: float | None = None, spread: float | None = None) -> bool | None:
    """The one rule for a quiet figure: other processes used under `QUIET_CORES`, the process got
    at least `PARALLEL_FLOOR` of its cores' speed where that was probed, and the repeats spread at
    most `STEADY_SPREAD` where known (None: not known)."""
    if cores is None:
        return None
    return (
        cores < QUIET_CORES
        and (parallel_speed is None or parallel_speed >= PARALLEL_FLOOR)
        and (spread is None or spread <= STEADY_SPREAD)
    )


def hover(label: str, unit: str = "") -> dict:
    """Field metadata: show the field in the explorer's hover text as ``label: value unit``
    (``unit`` "s" formats seconds as "2.63 ms")."""
    return {"hover": {"label": label, "unit": unit}}


@dataclass
class Measurement:
    """One timing of one program. Times are seconds; `error` is set (and the numbers are empty)
    when the program could not be built, checked or run."""

    latency_s: float | None = None  # median of the repeats
    std_s: float | None = None
    repeats: int = 0
    flops: float = 0.0
    gflops: float | None = None
    max_abs_error: float | None = None  # against the reference program on random inputs
    target: str = ""
    error: str | None = None
    error_kind: ErrorKind | None = None  # mlc_lab.model.errors.ERROR_KINDS
    min_s: float | None = None
    max_s: float | None = None
    results_s: list[float] = field(default_factory=list)
    max_rel_error: float | None = None
    correct: bool | None = None  # max_abs_error within 1e-3 of the output's magnitude
    build_s: float | None = field(default=None, metadata=hover("build", "s"))
    func_name: str | None = None
    iqr_s: float | None = None  # interquartile range of the repeats: the spread
    threads: int | None = None  # TVM's worker threads (CPU)
    cache: str = "warm"  # "warm" or "cold": see mlc_lab.tvm.measure
    method: str = ""  # the timing method in one sentence
    load: float | None = None  # the machine's 1-minute load average when it was measured
    where: str | None = field(default=None, metadata=hover("measured on"))  # elsewhere: the server or the batch job
    others_cores: float | None = None  # CPU time other processes used while it was timed, in cores
    # the share of its cores' speed the process got right after timing (1.0 full; ~0.5 on 2 threads:
    # the cores were shared, e.g. by a VM's host, which others_cores cannot see); CPU, >1 thread
    parallel_speed: float | None = None
    rounds: int | None = None  # rounds of repeats taken (again while not quiet: mlc_lab.tvm.measure)
    bytes: float | None = None  # memory traffic for the roofline: see bytes_source
    bytes_source: str = ""  # "footprint: ..." (the whole function's distinct bytes) or "compulsory: ..."
    bytes_by_buffer: dict[str, float] = field(default_factory=dict)  # the footprint's bytes per buffer
    intensity: float | None = None  # FLOPs per byte
    peak_gflops: float | None = None  # the machine's roofline at this intensity
    fraction_of_peak: float | None = None  # gflops / peak_gflops
    machine_peak_gflops: float | None = None  # the roof itself (mlc_lab.machine()), for plots
    machine_bandwidth_gbs: float | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def quiet(self) -> bool | None:
        """Whether the machine was quiet while this was timed: other processes used under a quarter
        of a core, the process got its cores' full speed (`parallel_speed`, when probed), and the
        repeats agreed (interquartile range within 10% of the median). Only then is a figure
        comparable with another one taken elsewhere."""
        return quiet(self.others_cores, self.parallel_speed, spread(self.iqr_s, self.latency_s))

    def to_json(self) -> dict:
        """The one encoding of a measurement (plain JSON: the worker, widgets, files, the CLI)."""
        return asdict(self)

    to_dict = to_json  # the older name

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Measurement:
        """A measurement from its encoding. Keys it does not declare are left out: the worker's
        timing dict carries working figures (``number``) that are no part of the measurement."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


# ----------------------------------------------------------------------------------------- a run elsewhere
# The measuring side's contract (``python -m mlc_lab.tvm.measure.runside FOLDER``): a folder holding
# ``manifest.json`` (a `RunManifest`), the artifacts and argument files it names; the measuring side
# writes ``results.json`` (a `RunResults`) and the output files it names back into that folder, or, with
# ``--fd N``, the same files as one `pack_files` stream on descriptor N (the sandbox's folder is gone
# after its run). Every name in either is a plain file name inside the folder. Both types are read
# strictly: a key they do not declare, a missing one or a value of the wrong type is refused with
# the place it was found.

RUN_FORMAT = 1  # the version both files carry; another is refused
RUN_DEVICES = ("cpu", "cuda", "opencl")
# How a candidate failed: its library did not load, the function raised, its outputs differ from the
# expected ones, the device is missing; the process running it crashed, ran past its time or memory
# (said by whoever watched the process: the measuring side cannot write after that), or wrote a
# result that cannot be read.
RUN_ERRORS = ("load", "run", "wrong", "device", "crash", "timeout", "memory", "unreadable")


class RunFormatError(ValueError):
    """A manifest, a result or a file stream that is not what the contract says (the message says where)."""


@dataclass(frozen=True)
class RunArg:
    """One argument of the function, in call order: ``file`` is a ``.npy`` file, or a ``.npz`` file
    holding the array under the argument's ``name``."""

    name: str
    file: str


@dataclass(frozen=True)
class SpeedProbe:
    """The parallel-speed probe (see `mlc_lab.tvm.measure`): a library built by the trusted side with
    the FMA kernels ``fma_all`` (``threads`` chunks of ``width`` floats) and ``fma_one`` (one chunk)."""

    artifact: str
    threads: int
    width: int


@dataclass(frozen=True)
class RunMethod:
    """The timing method's parameters (`mlc_lab.tvm.measure.TimingMethod`); ``threads`` is the
    ``TVM_NUM_THREADS`` the measuring side sets before TVM starts (None: its own usable cores)."""

    repeats: int = 10
    min_repeat_ms: float = 20.0
    cache: str = "warm"  # "warm" or "cold"
    threads: int | None = None
    warmup: int = 1
    rounds: int = 3
    speed_probe: SpeedProbe | None = None


@dataclass(frozen=True)
class RunCandidate:
    """One kernel to run: ``artifact`` (a ``.so`` exported by TVM for the CPU, a module file the
    runtime loads for CUDA, the OpenCL program's JSON of `mlc_lab.tvm.checks.opencl` for ``opencl``),
    its ``function`` and ``args``; ``outputs`` names the arguments it writes; ``expected`` (a ``.npz``
    of those by name) is compared on the far side with ``rtol``/``atol`` when given (advice: the grader
    compares the outputs it is sent itself); ``send_outputs`` sends every argument back as it was after
    the first call; ``time`` times it by the manifest's method."""

    id: str
    artifact: str
    function: str
    args: list[RunArg]
    outputs: list[str] = field(default_factory=list)
    expected: str | None = None
    rtol: float = 1e-3
    atol: float = 1e-3
    send_outputs: bool = False
    time: bool = True


@dataclass(frozen=True)
class RunManifest:
    version: int
    device: str  # one of RUN_DEVICES
    method: RunMethod
    candidates: list[RunCandidate]

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> RunManifest:
        raw = _strict(cls, data, "manifest", nested=("method", "candidates"))
        if raw["version"] != RUN_FORMAT:
            raise RunFormatError(f"manifest: version {raw['version']!r} is not {RUN_FORMAT}, the one this side reads")
        if raw["device"] not in RUN_DEVICES:
            raise RunFormatError(f"manifest.device: {raw['device']!r} is none of {', '.join(RUN_DEVICES)}")
        method = _strict(RunMethod, raw["method"], "manifest.method", nested=("speed_probe",))
        if method.get("speed_probe") is not None:
            method["speed_probe"] = SpeedProbe(
                **_strict(SpeedProbe, method["speed_probe"], "manifest.method.speed_probe")
            )
            _plain_name(method["speed_probe"].artifact, "manifest.method.speed_probe.artifact")
        if method.get("cache", "warm") not in ("warm", "cold"):
            raise RunFormatError(f"manifest.method.cache: {method['cache']!r} is not 'warm' or 'cold'")
        if not isinstance(raw["candidates"], list):
            raise RunFormatError("manifest.candidates: not a list")
        candidates = [_candidate(c, f"manifest.candidates[{i}]") for i, c in enumerate(raw["candidates"])]
        ids = [c.id for c in candidates]
        if len(set(ids)) != len(ids):
            raise RunFormatError(f"manifest.candidates: two candidates share an id ({', '.join(ids)})")
        return cls(raw["version"], raw["device"], RunMethod(**method), candidates)


def _candidate(data: Any, where: str) -> RunCandidate:
    raw = _strict(RunCandidate, data, where, nested=("args",))
    if not isinstance(raw["args"], list):
        raise RunFormatError(f"{where}.args: not a list")
    raw["args"] = [RunArg(**_strict(RunArg, a, f"{where}.args[{i}]")) for i, a in enumerate(raw["args"])]
    for name, value in (("artifact", raw["artifact"]), ("expected", raw.get("expected"))):
        if value is not None:
            _plain_name(value, f"{where}.{name}")
    for i, arg in enumerate(raw["args"]):
        _plain_name(arg.file, f"{where}.args[{i}].file")
    names = [a.name for a in raw["args"]]
    unknown = [o for o in raw.get("outputs", []) if o not in names]
    if unknown:
        raise RunFormatError(f"{where}.outputs: {unknown[0]!r} is none of its arguments ({', '.join(names)})")
    return RunCandidate(**raw)


@dataclass(frozen=True)
class RunError:
    kind: str  # one of RUN_ERRORS
    message: str  # one sentence


@dataclass
class CandidateResult:
    """What the measuring side says of one candidate. Times are seconds per call (the method's
    figure is ``latency_s``, the median of ``results_s``); ``correct``, ``wrong`` and ``max_abs_error``
    compare with the manifest's expected outputs when it gave them; ``outputs`` names, per argument,
    the ``.npy`` file holding it after the first call (when asked); the OpenCL run adds ``engine``,
    ``diagnostics`` (Oclgrind's reports), ``out_of_bounds`` and ``guard_writes``."""

    id: str
    ok: bool
    error: RunError | None = None
    latency_s: float | None = None
    min_s: float | None = None
    max_s: float | None = None
    iqr_s: float | None = None
    std_s: float | None = None
    results_s: list[float] = field(default_factory=list)
    repeats: int = 0
    threads: int | None = None
    others_cores: float | None = None
    parallel_speed: float | None = None
    rounds: int | None = None
    correct: bool | None = None
    wrong: int | None = None
    max_abs_error: float | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    engine: str = ""
    diagnostics: list[str] = field(default_factory=list)
    out_of_bounds: list[str] = field(default_factory=list)
    guard_writes: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)  # load, first call, timing


@dataclass
class RunResults:
    version: int
    device: str
    method: str  # the timing method in one sentence
    candidates: list[CandidateResult]
    load: float | None = None  # the machine's 1-minute load average as the run started
    runtime_only: bool | None = None  # whether the measuring side ran TVM's runtime alone
    host: str | None = None  # the machine that ran it (its host name): where a batch round ran
    started_at: float | None = None  # when the measuring side started (Unix time): a round's wait ends there

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> RunResults:
        raw = _strict(cls, data, "results", nested=("candidates",))
        if raw["version"] != RUN_FORMAT:
            raise RunFormatError(f"results: version {raw['version']!r} is not {RUN_FORMAT}")
        if not isinstance(raw["candidates"], list):
            raise RunFormatError("results.candidates: not a list")
        out = []
        for i, c in enumerate(raw["candidates"]):
            where = f"results.candidates[{i}]"
            one = _strict(CandidateResult, c, where, nested=("error",))
            if one.get("error") is not None:
                one["error"] = RunError(**_strict(RunError, one["error"], f"{where}.error"))
                if one["error"].kind not in RUN_ERRORS:
                    raise RunFormatError(
                        f"{where}.error.kind: {one['error'].kind!r} is none of {', '.join(RUN_ERRORS)}"
                    )
            for name, file in one.get("outputs", {}).items():
                _plain_name(file, f"{where}.outputs.{name}")
            out.append(CandidateResult(**one))
        raw["candidates"] = out
        return cls(**raw)


def _strict(cls: type, data: Any, where: str, nested: tuple[str, ...] = ()) -> dict:
    """``data``'s fields for ``cls``: an object whose keys ``cls`` declares, with every field that has
    no default, each value of its declared type (``nested`` fields are left to their own reader)."""
    from dataclasses import MISSING

    from mlc_lab.model.conform import fields_of, problems

    if not isinstance(data, dict):
        raise RunFormatError(f"{where}: not an object")
    declared = {f.name: f for f in fields(cls)}
    extra = sorted(k for k in data if k not in declared)
    if extra:
        raise RunFormatError(f"{where}: no key {extra[0]!r} in a {cls.__name__} (it has: {', '.join(declared)})")
    missing = [
        n for n, f in declared.items() if f.default is MISSING and f.default_factory is MISSING and n not in data
    ]
    if missing:
        raise RunFormatError(f"{where}: {missing[0]!r} is missing")
    hints = fields_of(cls)[0]
    for key, value in data.items():
        if key in nested:
            continue
        bad = problems(value, hints[key], f"{where}.{key}", limit=1)
        if bad:
            raise RunFormatError(bad[0])
    return dict(data)


def _plain_name(name: str, where: str) -> None:
    """A file name inside the run's folder: no folder part, no ``..``."""
    if not name or "/" in name or "\\" in name or name in (".", "..") or "\0" in name:
        raise RunFormatError(f"{where}: {name!r} is not a plain file name in the run's folder")


_STREAM_MAGIC = b"MLC-LAB-RUN-FILES 1\n"


def pack_files(files: dict[str, bytes]) -> bytes:
    """Files as one stream (what the measuring side writes on a descriptor): a header line, then a
    JSON line of ``[[name, size], ...]``, then the files' bytes in that order."""
    for name in files:
        _plain_name(name, "a packed file's name")
    import json

    index = json.dumps([[name, len(data)] for name, data in files.items()]).encode()
    return _STREAM_MAGIC + index + b"\n" + b"".join(files.values())


def unpack_files(data: bytes, max_files: int = 4096) -> dict[str, bytes]:
    """`pack_files`' stream as files, read strictly: anything else (a stream cut short, bytes after the
    last file, a name that is not plain, a file named twice) raises `RunFormatError`."""
    import json

    if not data.startswith(_STREAM_MAGIC):
        raise RunFormatError("the stream does not start as the measuring side's files do")
    head, sep, body = data[len(_STREAM_MAGIC) :].partition(b"\n")
    if not sep or len(head) > 1 << 20:
        raise RunFormatError("the stream's index of files is cut short")
    try:
        index = json.loads(head)
    except (ValueError, RecursionError):
        raise RunFormatError("the stream's index of files is not JSON") from None
    if not isinstance(index, list) or len(index) > max_files:
        raise RunFormatError("the stream's index of files is not a list of [name, size] (or is too long)")
    out: dict[str, bytes] = {}
    at = 0
    for entry in index:
        ok = isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str) and type(entry[1]) is int
        if not ok or entry[1] < 0:
            raise RunFormatError(f"the stream's index holds {str(entry)[:80]!r}, not [name, size]")
        name, size = entry
        _plain_name(name, "a file of the stream")
        if name in out:
            raise RunFormatError(f"the stream holds {name!r} twice")
        if at + size > len(body):
            raise RunFormatError(f"the stream is cut short in {name!r}")
        out[name] = body[at : at + size]
        at += size
    if at != len(body):
        raise RunFormatError(f"the stream holds {len(body) - at} bytes after its last file")
    return out
