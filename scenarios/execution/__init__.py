"""What a simulating engine executes: the per-rank timeline of the workload (:mod:`.timeline`)
and, on the packet engine, the run's faults and invariant checks (:mod:`.faults`)."""
