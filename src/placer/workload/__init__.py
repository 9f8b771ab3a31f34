"""What the policies know of a workload: FGD's target workload and fragmentation measure,
and what ``fgd-pack`` learns beyond it.
"""
