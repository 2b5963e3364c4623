"""The scenario file: its schema (:mod:`.schema`), reading it with ``include:``, variants and
``--set`` (:mod:`.loader`), the registries its names are checked against (:mod:`.registries`)
and the reference of every key (:mod:`.docs`, ``podsim docs``)."""
