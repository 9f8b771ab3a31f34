"""Placing pods and gangs: the Cluster state, one-shot placement, gangs over topology
levels, GPU sets inside a node, GPU sharing, and the order pods go in.
"""
