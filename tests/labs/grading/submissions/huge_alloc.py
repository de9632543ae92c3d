import numpy as np


def schedule(sch):
    scratch = np.ones(10 * 2**30 // 8)  # 10 GB
    return scratch.sum()
