"""The bottom layer: plain data that crosses layers and processes (no TVM, no numpy, nothing of mlc_lab).

Every layer may import it (widgets, core, and the one door to TVM, ``mlc_lab.tvm``); it imports
nothing above it, so importing it never starts TVM. The import contract in pyproject.toml
(``[tool.importlinter]``, run by ``./run.sh test``) keeps it so.

- ``steps``: the step, the loop tree and the change pushed to every view.
- ``access_program``: the plain description of a tensor function that the access analysis reads.
- ``schedule_facts``: the blocks, loop annotations and allocated sizes the named checks read.
"""
