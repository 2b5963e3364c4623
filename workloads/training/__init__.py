"""Training steps as operation graphs: pipeline schedules, the model's compute and traffic.

``schedule`` orders each pipeline stage's forward and backward passes (1F1B, GPipe),
``model`` gives per-layer FLOPs and bytes of an MoE transformer, ``gpu`` the accelerators'
sourced peak rates, ``step`` builds one training step (TP x PP x EP x DP) as an
:class:`podsim.workloads.graph.OpGraph`, and ``metrics`` reads step time, MFU, exposed
communication and the pipeline bubble from the executed graph's spans.
"""
