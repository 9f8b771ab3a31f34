"""Replays and studies: the FGD trace replay, sweeps of replays, and where their runs go
(local processes or Ray).
"""
