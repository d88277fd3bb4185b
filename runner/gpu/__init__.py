"""The GPU track: real PyTorch on a CUDA device (runner/README.md, "GPU").

The modules fall on either side of its trust boundary.

The grader's side (trusted; never runs a candidate's code, never touches the device):
``grading`` (the flow and the verdict), ``host`` (talks to the run processes and decodes
what they send as untrusted input), ``timing`` (the clock and the statistics) and
``calibrate`` (sizing an exercise for a device, run by hand).

Next to the candidate's code, inside a GPU run's process: ``worker`` (the fork server
and its run processes), ``kit`` (what the candidate's training goes through: recorder,
optimizer, host batches, race amplification) and ``wire`` (how values cross to the
grader). The grader imports ``wire`` to decode and exercises' graders use ``kit``'s
helpers, but nothing these modules report from a run process is trusted.

Nothing is imported here: ``python -m runner.gpu.worker`` loads only what it needs.
"""
