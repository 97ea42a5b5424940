"""Pure, no I/O: quantities, field paths, the Pod spec, workloads, configuration, the engine, mutation and the rules."""
