"""The bottom layer: plain data that crosses layers and processes (no TVM, no numpy, nothing of mlc_lab).

Every layer may import it (widgets, core, and the one door to TVM, ``mlc_lab.tvm``); it imports
nothing above it, so importing it never starts TVM. The import contract in pyproject.toml
(``[tool.importlinter]``, run by ``./run.sh test``) keeps it so.

- ``steps``: the step, the loop tree, the history's summaries and the change pushed to every view.
- ``access``: the memory view's contract: ``access.program``, the plain description of a tensor function that
  the access analysis reads; ``access.payload``, what the memory view receives (footprints, warp statistics).
- ``measurement``: one timing of one program, and the quiet rule (thresholds, ``quiet``, ``spread``).
- ``tuning``: what the tuning dashboard shows of a job (best trial, roof, failures, a trial).
- ``lowering``: how a step compiles (passes, loop and kernel facts).
- ``checks``: a check's verdict, a kernel's hazard, a step's report; the Checks panel's wire; ``checks.facts``:
  the blocks, loop annotations and allocated sizes the named checks read.
- ``wire``: the JSON lines between the kernel and its worker process (numpy arrays as base64).
- ``classroom``: the class server's JSON (leaderboard, summary, verdict) and the Submit bar's state.
- ``errors``: errors as values, and the one vocabulary of their kinds.
- ``traits``: each widget's synced traits, one TypedDict per widget class.
- ``requests``: every request a widget answers, in one table: parameters, result, and policy (background,
  recorded for saved notebooks, step-implied, error kinds); the record key.
- ``conform``: whether a value is what a type of the contract says (the strict wire, the tests).

The wire contract: each module lists in ``WIRE`` the types that cross to the page; they are written to
``js/lib/model.ts`` by ``python -m mlc_lab.core.model_ts``, with the request table, its parameter and
result types, and the kinds of errors and hazards; tests/unit/test_model.py fails when that file is
stale, and ``tsc --noEmit`` checks its users. To add a field, add it here and regenerate: the
TypeScript compiler then names every user that must handle it, and the suite's strict wire
(``MLC_LAB_STRICT_WIRE``, set by tests/conftest.py) fails any test in which Python sends a value its
type does not declare. A Measurement field whose metadata is ``hover(label, unit)`` is also listed in
the explorer's hover text, with no TypeScript edit.
"""
