"""From a validated scenario to what an engine runs: the cluster and the workload trace
(:mod:`.cluster`), and the up-front resource estimate that refuses a run too big for the machine
(:mod:`.limits`)."""
