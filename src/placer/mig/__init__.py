"""NVIDIA MIG above the kernel: instance layouts, what still fits and re-layout
plans, MIG gangs, and the exact CP-SAT placement of MIG pods.
"""
