"""Built here, run there: a compiled program as one shared library that a machine with TVM's runtime
alone loads, with no compiler and no Python callback.

A CPU program is its host code. A CUDA program built here (no GPU, the wheel's compiler) carries
its kernels as CUDA *source*: the machine that loads it compiles them with NVRTC through
``tvm_callback_cuda_compile``, a Python function of the full TVM (``reference/gpu-h200.md``), so a
GPU box that runs only TVM's runtime cannot load it. `export_artifact` compiles those kernels here
with the CUDA toolkit (``nvcc``) into a fat binary, machine code (SASS) for the target's
architecture plus its PTX (which the driver compiles for a newer GPU), and writes that into the
library in the source's place: the GPU machine's runtime hands it to the driver
(``cuModuleLoadData``) as it does any compiled CUDA module.

How it is written: ``export_library`` serialises the library's imported modules into one blob
(symbol ``__tvm_ffi__library_bin``: the import tree, then each module's type key and bytes); a
CUDA module's bytes are ``[format][function table][code]``. `export_artifact` rewrites the
format ("cuda" -> "fatbin") and the code (source -> fat binary) and keeps the function table as
TVM wrote it. `library_imports` reads the blob back from a library (a small ELF reader: nothing
is loaded or run), which is how a test, or the measuring side, tells a binary from source.
"""

from __future__ import annotations

import os
import struct
import tempfile
from typing import Any

import tvm
from tvm.runtime import _ffi_api as _runtime_api

BLOB_SYMBOL = "__tvm_ffi__library_bin"
SOURCE_FORMAT = "cuda"  # a CUDA module whose code is source: compiled where it is loaded
BINARY_FORMAT = "fatbin"


class ArtifactError(Exception):
    """The program cannot be made into a library another machine loads (one sentence)."""


# ----------------------------------------------------------------------------------------- export


def export_artifact(rt_mod: Any, path: str, target: Any, fcompile: Any = None) -> dict:
    """Write `rt_mod` (a ``tvm.compile`` result or its ``.mod``) to the shared library `path` so that
    TVM's runtime alone loads it. For a CUDA target its kernels are compiled here first (nvcc, for
    the target's ``arch``). `fcompile`: the linker, as ``export_library`` takes it (CPU only).
    Returns ``{"path", "device", "format", "bytes"}``; an `ArtifactError` when it cannot be done."""
    mod = getattr(rt_mod, "mod", rt_mod)
    kind = _target_kind(target)
    if kind != "cuda":
        mod.export_library(path, fcompile=fcompile) if fcompile is not None else mod.export_library(path)
        return {"path": path, "device": "cpu", "format": "host", "bytes": os.path.getsize(path)}
    cuda = [m for m in mod.imports if m.kind == "cuda"]
    if not cuda:
        raise ArtifactError("the program compiled to host code only (no CUDA kernel): are its loops bound?")
    arch = cuda_arch(target)
    binaries = {id(m): compile_fatbin(m.inspect_source(), arch) for m in cuda}

    def pack(host: Any, _is_system_lib: bool, _prefix: str, workspace: str) -> str:
        blob = bytes(_runtime_api.ModulePackImportsToTensor(host).numpy())
        rewritten = rewrite_cuda_imports(blob, list(binaries.values()))
        out = os.path.join(workspace, "devc.c")
        with open(out, "w") as fh:
            fh.write(blob_as_c(rewritten))
        return out

    mod.export_library(path, fpack_imports=pack)
    return {"path": path, "device": "cuda", "format": BINARY_FORMAT, "arch": arch, "bytes": os.path.getsize(path)}


def _target_kind(target: Any) -> str:
    if isinstance(target, str):
        return "cuda" if target in ("cuda", "gpu") or target.startswith("cuda") else "cpu"
    if isinstance(target, dict):
        return "cuda" if target.get("kind") == "cuda" else "cpu"
    return "cuda" if target.kind.name == "cuda" else "cpu"


def cuda_arch(target: Any) -> str:
    """The target's ``sm_XY`` (the default CUDA architecture when it names none)."""
    from mlc_lab.tvm.targets import DEFAULT_CUDA_ARCH, resolve_target

    return str(resolve_target(target).attrs.get("arch", "") or DEFAULT_CUDA_ARCH)  # TVM holds it to sm_XY


def compile_fatbin(source: str, arch: str) -> bytes:
    """CUDA source compiled by nvcc into a fat binary: SASS for `arch` and its PTX."""
    import shutil

    if shutil.which("nvcc") is None:
        raise ArtifactError(
            "nvcc was not found on PATH: a CUDA program is compiled here, before it is sent to a machine "
            "that has only TVM's runtime; install the CUDA toolkit (nvcc, ptxas)"
        )
    from tvm.support import nvcc

    number = arch[3:]
    gencode = ["-gencode", f"arch=compute_{number.rstrip('af')},code=[sm_{number},compute_{number.rstrip('af')}]"]
    try:
        with tvm.target.Target({"kind": "cuda", "arch": arch}):  # compile_cuda reads the current target
            out = nvcc.compile_cuda(source, target_format="fatbin", arch=gencode, compiler="nvcc")
    except Exception as exc:  # noqa: BLE001 - nvcc's own message is the detail
        lines = [line for line in str(exc).strip().splitlines() if line.strip()]
        raise ArtifactError(f"nvcc could not compile the kernels for {arch}: {lines[-1] if lines else exc}") from exc
    return bytes(out)


# ----------------------------------------------------------------------------------------- the blob


def _read_u64(data: bytes, pos: int) -> tuple[int, int]:
    if pos + 8 > len(data):
        raise ArtifactError("the library's module blob ends early")
    return struct.unpack_from("<Q", data, pos)[0], pos + 8


def _read_bytes(data: bytes, pos: int) -> tuple[bytes, int]:
    n, pos = _read_u64(data, pos)
    if pos + n > len(data):
        raise ArtifactError("the library's module blob ends early")
    return data[pos : pos + n], pos + n


def _u64(n: int) -> bytes:
    return struct.pack("<Q", n)


def _with_length(data: bytes) -> bytes:
    return _u64(len(data)) + data


def split_blob(blob: bytes) -> tuple[bytes, list[tuple[str, bytes | None]]]:
    """(the import tree's bytes, [(type key, module bytes or None for the host library "_lib")])."""
    total, pos = _read_u64(blob, 0)
    body = blob[pos : pos + total]
    pos = 0
    n_rows, pos = _read_u64(body, pos)
    pos += 8 * n_rows
    n_children, pos = _read_u64(body, pos)
    pos += 8 * n_children
    tree = body[:pos]
    modules: list[tuple[str, bytes | None]] = []
    for _ in range(max(0, n_rows - 1)):
        key_bytes, pos = _read_bytes(body, pos)
        key = key_bytes.decode()
        if key == "_lib":
            modules.append((key, None))
            continue
        payload, pos = _read_bytes(body, pos)
        modules.append((key, payload))
    return tree, modules


def join_blob(tree: bytes, modules: list[tuple[str, bytes | None]]) -> bytes:
    body = tree + b"".join(
        _with_length(key.encode()) + (b"" if payload is None else _with_length(payload)) for key, payload in modules
    )
    return _with_length(body)


def split_cuda_module(payload: bytes) -> tuple[str, bytes, bytes]:
    """A CUDA module's bytes as (format, its function table as written, code). The code is last,
    ``[u64 length][code]``: the first length field that ends exactly at the end of the bytes (a
    string's length inside the table is always followed by more of the table)."""
    fmt, pos = _read_bytes(payload, 0)
    for start in range(pos, len(payload) - 7):
        n = struct.unpack_from("<Q", payload, start)[0]
        if start + 8 + n == len(payload):
            return fmt.decode(), payload[pos:start], payload[start + 8 :]
    raise ArtifactError("a CUDA module in the library is not laid out as TVM writes it")


def rewrite_cuda_imports(blob: bytes, binaries: list[bytes]) -> bytes:
    """`blob` with its CUDA modules' source replaced, in order, by `binaries` (format "fatbin")."""
    tree, modules = split_blob(blob)
    left = list(binaries)
    out: list[tuple[str, bytes | None]] = []
    for key, payload in modules:
        if key == "cuda" and payload is not None:
            fmt, table, _code = split_cuda_module(payload)
            if fmt == SOURCE_FORMAT:
                if not left:
                    raise ArtifactError("the library holds more CUDA modules than were compiled")
                payload = _with_length(BINARY_FORMAT.encode()) + table + _with_length(left.pop(0))
        out.append((key, payload))
    return join_blob(tree, out)


def blob_as_c(blob: bytes) -> str:
    """The blob as the C file ``export_library`` compiles into the library."""
    rows = [",".join(f"0x{b:02x}" for b in blob[i : i + 24]) for i in range(0, len(blob), 24)]
    return (
        '#ifdef __cplusplus\nextern "C" {\n#endif\n'
        f"extern const unsigned char {BLOB_SYMBOL}[];\n"
        f"const unsigned char {BLOB_SYMBOL}[{len(blob)}] = {{\n" + ",\n".join(rows) + "\n};\n"
        "#ifdef __cplusplus\n}\n#endif\n"
    )


# ----------------------------------------------------------------------------------------- reading back


def library_imports(path: str) -> list[dict]:
    """What the shared library at `path` carries besides its host code: one ``{"kind", "format",
    "bytes"}`` per imported module (format: "cuda" = source, "fatbin"/"cubin"/"ptx" = compiled;
    None for other kinds). Read from the file; nothing is loaded."""
    blob = _library_blob(path)
    if blob is None:
        return []
    out = []
    for key, payload in split_blob(blob)[1]:
        if payload is None:
            continue
        fmt = split_cuda_module(payload)[0] if key == "cuda" else None
        out.append({"kind": key, "format": fmt, "bytes": len(payload)})
    return out


def _library_blob(path: str) -> bytes | None:
    """The bytes of the library's ``__tvm_ffi__library_bin`` (its u64 length included), or None."""
    with open(path, "rb") as fh:
        data = fh.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ArtifactError(f"{path} is not a 64-bit little-endian ELF shared library")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if kind not in (2, 11) or not entsize:  # SHT_SYMTAB, SHT_DYNSYM
            continue
        strtab = sections[link]
        for i in range(size // entsize):
            st_name, _st_info, _other, _shndx, value, _st_size = struct.unpack_from(
                "<IBBHQQ", data, offset + i * entsize
            )
            start = strtab[4] + st_name
            if data[start : data.index(b"\0", start)].decode(errors="replace") != BLOB_SYMBOL:
                continue
            for _n, _k, _f, addr, sec_offset, sec_size, *_rest in sections:
                if addr and addr <= value < addr + sec_size:
                    pos = sec_offset + value - addr
                    n = struct.unpack_from("<Q", data, pos)[0]
                    return data[pos : pos + 8 + n]
    return None


def carries_cuda_source(path: str) -> bool:
    """Whether the library's CUDA kernels are source (a runtime-only machine cannot load them)."""
    return any(m["kind"] == "cuda" and m["format"] == SOURCE_FORMAT for m in library_imports(path))


def scratch_path(suffix: str = ".so") -> str:
    fd, path = tempfile.mkstemp(prefix="mlc_lab_artifact_", suffix=suffix)
    os.close(fd)
    return path
