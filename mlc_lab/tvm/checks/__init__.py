"""The TVM side of the named checks: a scheduled function's facts, and a GPU kernel's OpenCL code for the numeric check (run by `mlc_lab.tvm.measure.opencl_run` in a child without TVM)."""
