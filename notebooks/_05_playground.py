"""The cells of notebooks/05_playground.ipynb, written out by ``notebooks/_build.py``.

("md", text) | ("code", source) | ("code!", source): a solution, collapsed when opened. Its one
program is the course's MyAdd in the legacy spelling on purpose: the cell shows what ``convert`` rewrites.
"""

from __future__ import annotations

CELLS: list[tuple[str, str]] = [
    (
        "md",
        r"""
# 5. Playground

Paste any TensorIR program into `PROGRAM` below and run the notebook: the explorer opens on it.
Today's spelling (`tirx`, `T.sblock`) and the course's older one (`tir`, `T.block`, `T.Buffer[...]`,
`tvm.tir.Schedule`, `get_block`, `tvm.build`, ...) both work. The first decorated module or
function in the text is the program; other code in it is *not* run.

Pre-filled: the course's element-wise add with its parallel / unroll / vectorize demo, as the
course printed it (old spelling).
""",
    ),
    (
        "code",
        r'''
import mlc_lab

PROGRAM = """
import numpy as np
import tvm
from tvm.script import tir as T


@tvm.script.ir_module
class MyAdd:
    @T.prim_func
    def add(A: T.Buffer[(4, 4), "int64"],
            B: T.Buffer[(4, 4), "int64"],
            C: T.Buffer[(4, 4), "int64"]):
        T.func_attr({"global_symbol": "add"})
        for i, j in T.grid(4, 4):
            with T.block("C"):
                vi = T.axis.spatial(4, i)
                vj = T.axis.spatial(4, j)
                C[vi, vj] = A[vi, vj] + B[vi, vj]


sch = tvm.tir.Schedule(MyAdd)
block = sch.get_block("C", func_name="add")
i, j = sch.get_loops(block)
i0, i1 = sch.split(i, factors=[2, 2])
sch.parallel(i0)
sch.unroll(i1)
sch.vectorize(j)
rt_lib = tvm.build(sch.mod, target="llvm")
a_tvm = tvm.nd.array(np.arange(16).reshape(4, 4))
"""
''',
    ),
    (
        "md",
        r"""
`mlc_lab.convert` rewrites old course code for today's TVM, keeping your layout and comments (and
marking anything it cannot convert). Copy from its output what you want to keep.
""",
    ),
    (
        "code",
        r"""
print(mlc_lab.convert(PROGRAM))
""",
    ),
    (
        "md",
        r"""
The explorer on the program. Select a loop or a block, pick a primitive, apply; undo and redo freely
(the history is a tree). Errors are explained in a sentence and change nothing.
""",
    ),
    (
        "code",
        r"""
playground = mlc_lab.explore(PROGRAM)
session = playground.session
playground
""",
    ),
    (
        "md",
        r"""
Steps can come from Python too, using the names shown in the script. A function written against
TVM's schedule API (as in the course, with today's `get_sblock`) is recorded step by step with
`session.run`. This is the pre-filled program's demo; change it or skip it for your own program.
""",
    ),
    (
        "code",
        r"""
def schedule(sch):
    block = sch.get_sblock("C", func_name="add")
    i, j = sch.get_loops(block)
    i0, i1 = sch.split(i, factors=[2, 2])
    sch.parallel(i0)
    sch.unroll(i1)
    sch.vectorize(j)


if session.func_name == "add":   # only for the pre-filled example
    session.goto(0)               # from the original program: steps clicked above stay in the history
    session.run(schedule)
print(session.script)
""",
    ),
    (
        "md",
        r"""
Check and time the current step against the original program (random inputs, a separate process),
and list what the innermost loop touches:
""",
    ),
    (
        "code",
        r"""
m = session.measure()
print(f"step {session.current.id}: {m.latency_s * 1e6:.2f} us, correct={m.correct}" if m.ok else m.error)


def innermost(tree):
    last = None
    stack = list(tree["functions"][0]["children"])
    while stack:
        node = stack.pop(0)
        if node["kind"] == "loop":
            last = node.get("qualified") or node["name"]
        stack[:0] = node.get("children", [])
    return last


loop = innermost(session.loop_tree())
for name, fp in session.footprint(loop).items():
    s = fp.summary()
    print(f"{loop}: {name} touches {s['distinct']} element(s), strides {s['strides']}")
""",
    ),
    (
        "code",
        r"""
try:
    from mlc_lab.widgets.access.view import access_view
except ImportError:  # an older mlc_lab without the access view
    access_view = None
access_view(session, loop) if access_view is not None else None
""",
    ),
]
