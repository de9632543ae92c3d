"""The TVM side of tuning: the meta_schedule job (`job`), its builder, live log, cost model, CPU design space and measuring process."""
