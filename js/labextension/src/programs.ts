// The course programs the Launcher offers; the same names as mlc_lab/tvm/course_programs.py
// (tests/unit/test_labextension.py keeps the two lists equal).
export const COURSE_PROGRAMS: Array<{ name: string; title: string }> = [
  { name: "mm_relu", title: "Chapter 2: matmul + ReLU (128x128)" },
  { name: "matmul", title: "Chapter 4: matmul (128x128)" },
  { name: "bmm_relu", title: "Exercise: batched matmul + ReLU" },
  { name: "vector_add", title: "Vector add (1024)" },
];
