"""A run's results: the tables, the summary and saved result folders (:mod:`.tables`), and the
straggler, critical-path and idle-time analysis (:mod:`.analysis`)."""
