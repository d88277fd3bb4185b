"""The candidate's side of a grading: a light process that runs the candidate's code.

Standard library only (no torch, no kit): the simulated cluster, its clock, its values,
its trace and the verdict all stay in the trusted grader's process (``runner.sim.host``).
Here the candidate's code sees the kit through proxies (:mod:`runner.candidate.proxies`)
and runs on a stock asyncio event loop whose idle steps ask the grader for the next
completions (:mod:`runner.candidate.loop`). See runner/README.md, "Trusted grading".
"""
