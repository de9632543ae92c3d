"""The way from a schedule to a target program (``Session.path_to``, ``mlc-lab path``): read off the
target with TVM as the oracle (``engine``), from the blocks (``blocks``) and each block's loops
(``tiling``), applied on a schedule of the engine's own (``work``, ``plan``)."""
