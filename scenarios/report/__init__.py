"""What a run shows a design review: the figures (:mod:`.plots`) and one self-contained HTML
report (:mod:`.html`)."""
