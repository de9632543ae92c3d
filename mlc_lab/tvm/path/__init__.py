"""The way from a schedule to a target program (``Session.path_to``, ``Session.hint``, ``mlc-lab path``),
read off the target with TVM as the oracle.

- ``ir``: a PrimFunc read into loops, blocks and TVM's iter maps of the bindings;
- ``blocks``: which target block is which program block, the stages primitives make, the placements;
- ``tiling``: one block's loops, from how they are to the target's (splits, reorder, fuses);
- ``unitpad``: a unit iterator the target binds to 0 under a padding split (its loop fused alone, then split);
- ``padding``: pad_einsum's factors read off the padded buffers (``X_pad``, ``X_pad_local``), its copies inlined;
- ``stages``: cache stages, rfactor, set_scope, layouts, inlining, applied as they are needed;
- ``plan``: one way carried out (nests, moves, loop kinds, annotations, decomposition);
- ``engine``: the attempts, checked with TVM's structural equality; ``explain``: the first difference;
- ``names``: a target whose blocks are named otherwise; ``work``: the schedule worked on, its steps;
- ``way``: the way as the Session takes it (steps named as in the script before each, the trace).
- ``through``: the way from a step the way from the original program passes through (its rest).
"""
