# Lab 4: SGEMM, with the thread loops bound first and ko inside them (TensorIR's usual order).
BM, BN, BK = 128, 128, 8  # the tile of C a thread block computes, and the k step
TM, TN = 8, 8  # the tile of C a thread computes


def schedule(sch):
    c = sch.get_sblock("C")
    c_local = sch.cache_write(c, 0, "local")
    i, j, k = sch.get_loops(c)
    by, ty, ti = sch.split(i, [None, BM // TM, TM])
    bx, tx, tj = sch.split(j, [None, BN // TN, TN])
    ko, ki = sch.split(k, [None, BK])
    sch.reorder(by, bx, ty, tx, ko, ki, ti, tj)
    sch.bind(by, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    # the block's tiles of A and B in shared memory, copied by all its threads
    for operand in (0, 1):
        tile = sch.cache_read(c, operand, "shared")
        sch.compute_at(tile, ko)
        fused = sch.fuse(*sch.get_loops(tile)[-2:])
        _, cy, cx, vec = sch.split(fused, [None, BM // TM, BN // TN, 4])
        sch.bind(cy, "threadIdx.y")
        sch.bind(cx, "threadIdx.x")
        sch.vectorize(vec)
    # each thread's column of A and row of B in registers, for every ki
    for operand in (0, 1):
        regs = sch.cache_read(c, operand, "local")
        sch.compute_at(regs, ki)
    # after the ko loop: every thread stores the tile it computed
    sch.reverse_compute_at(c_local, bx)
    wi, wj = sch.get_loops(c_local)[-2:]
    wy, wi = sch.split(wi, [BM // TM, TM])
    wx, wj = sch.split(wj, [BN // TN, TN])
    sch.reorder(wy, wx, wi, wj)
    sch.bind(wy, "threadIdx.y")
    sch.bind(wx, "threadIdx.x")
    sch.decompose_reduction(c, ko)
    sch.unroll(ki)
