"""Text in and out: lines with located errors, words for error messages, all-or-nothing
file writes and bundled data, Slurm hostlists.
"""
