def schedule(sch):
    block = sch.get_sblock("gemm"
    i, j, k = sch.get_loops(block)
