"""mlc-lab lower FILE [--trace T] [--target cpu|cuda|ARCH|TAG|JSON] [--pass NAME] [--asm|--llvm|--source|--json]:
what tvm.compile does with a (scheduled) program: its passes, the generated code, facts per loop."""

from __future__ import annotations

import argparse
import difflib
import json
import sys

from mlc_lab._cli.common import open_session
from mlc_lab.errors import UsageError


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "lower",
        help="list the passes tvm.compile runs on a program (after a trace), with facts of the generated code",
    )
    p.add_argument("file", help="the program (.py with TVMScript)")
    p.add_argument("--trace", help="a schedule trace to apply first (TVM's printed trace or its JSON; never executed)")
    p.add_argument("--func", help="the PrimFunc to compile")
    p.add_argument(
        "--target",
        default="cpu",
        help="cpu (this machine's CPU), cuda, a CUDA arch (sm_75), a TVM target tag "
        '(nvidia/geforce-rtx-3080) or a target as JSON (\'{"kind": "cuda", "arch": "sm_75"}\')',
    )
    p.add_argument(
        "--pass",
        dest="pass_name",
        metavar="NAME",
        help="print what the pass NAME changed (a diff of the TVMScript before and after it)",
    )
    out = p.add_mutually_exclusive_group()
    out.add_argument("--asm", action="store_true", help="print the assembly (CPU) or the PTX (CUDA)")
    out.add_argument("--llvm", action="store_true", help="print the LLVM IR (CPU)")
    out.add_argument("--source", action="store_true", help="print the CUDA source (CUDA)")
    out.add_argument("--json", action="store_true", help="print passes, loop facts and verdict as JSON")
    return p


def run(args: argparse.Namespace) -> int:
    from mlc_lab.core.lowering import target_info

    session = open_session(args.file, args.func, args.trace)
    target = _target(args.target)
    kind = target_info(target)["kind"]
    if args.llvm and kind != "cpu":
        raise UsageError("--llvm prints the LLVM IR of a CPU build; for a CUDA target use --source or --asm (PTX)")
    if args.source and kind != "cuda":
        raise UsageError("--source prints CUDA source; for --target cpu use --asm or --llvm")
    low = session.lower(target=target)
    if args.pass_name:
        passes = low.passes_named(args.pass_name)
        if args.json:
            _dump(
                [
                    {
                        "name": p.name,
                        "index": p.index,
                        "status": p.status,
                        "error": p.error,
                        "before": low.script_before(p),
                        "after": low.script_after(p),
                    }
                    for p in passes
                ]
            )
            return 0
        for p in passes:
            sys.stdout.write(_pass_diff(low, p))
        return 0
    if args.json:
        _dump(low.to_json(texts=False))
    elif args.asm:
        sys.stdout.write((low.asm if low.kind == "cpu" else (low.ptx or f"// no PTX: {low.ptx_error}")) + "\n")
    elif args.llvm:
        sys.stdout.write(low.llvm_ir + "\n")
    elif args.source:
        sys.stdout.write(low.cuda_source + "\n")
    else:
        sys.stdout.write(_report(low))
    return 0 if low.ok else 1


def _target(text: str) -> object:
    """--target as given: a JSON object is a target dict, anything else a name, arch or tag."""
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--target: {text!r} is not valid JSON ({exc.msg} at column {exc.colno})") from None
    return text


def _dump(obj: object) -> None:
    json.dump(obj, sys.stdout, indent=1)
    sys.stdout.write("\n")


def _pass_diff(low, p) -> str:
    head = f"# {p.index}: {p.name} ({p.status}{', ' + p.note if p.note else ''})\n"
    if p.status == "failed":
        return head + f"# error: {p.error}\n"
    if p.status != "changed":
        return head + "# no change\n"
    diff = difflib.unified_diff(
        low.script_before(p).splitlines(), low.script_after(p).splitlines(), "before", "after", lineterm=""
    )
    return head + "\n".join(diff) + "\n"


def _report(low) -> str:
    lines = [low.summary(), "", "passes:"]
    for p in low.passes:
        mark = {"changed": "*", "no-op": " ", "failed": "!"}.get(p.status, "?")
        note = f" ({p.note})" if p.note else ""
        lines.append(f" {mark} {p.index:3d} {'  ' * p.depth}{p.name}{note}  [{p.phase}] {p.status}")
        if p.error:
            lines.append("        " + p.error.splitlines()[0])
    if low.loops:
        lines += ["", "loops (lines of the step's script):"]
        for f in low.loops:
            width = f"{f.vector_width}-wide {f.register}" if f.vector_width else "scalar"
            lines.append(
                f"  {f.loop:<10} {f.kind:<11} line {f.line:<3} {width:<12} fma {f.vector_fma} vector / {f.scalar_fma} scalar,"
                f" loads {f.vector_loads}v/{f.scalar_loads}s, stores {f.vector_stores}v/{f.scalar_stores}s"
                + (f", unrolled x{f.unrolled_copies}" if f.unrolled_copies else "")
                + (f", calls {f.runtime_calls}" if f.runtime_calls else "")
            )
    for k in low.kernels:
        lines.append(
            f"  kernel {k.name}: {k.registers} registers, {k.shared_bytes} B shared, "
            f"spills {k.spill_stores}/{k.spill_loads} B, {k.vector_loads} vector loads"
        )
    return "\n".join(lines) + "\n"
