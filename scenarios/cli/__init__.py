"""The ``podsim`` command: the app and the run/trace/validate/show/docs/list/plot/report commands
(:mod:`.app`), what every command shares (:mod:`.common`), ``cost`` and ``sweep``
(:mod:`.study`)."""
