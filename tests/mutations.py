"""A Hypothesis strategy for the fuzz tests of the text readers: a fixture text with a few
characters or lines deleted, inserted or duplicated."""

from __future__ import annotations

from typing import Sequence

from hypothesis import strategies as st

CHAR_OPS = ("del", "ins", "dup")


@st.composite
def mutated(
    draw: st.DrawFn, sources: Sequence[str], inserts: Sequence[str], line_ops: Sequence[str]
) -> str:
    """One of ``sources`` after 1 to 4 edits, each of :data:`CHAR_OPS` or of ``line_ops``.

    ``del``/``dup`` delete or double a character, ``ins`` inserts one of ``inserts``;
    ``del_line``/``dup_line`` delete or double a line, ``swap_lines`` swaps two lines and
    ``ins_line`` inserts a copy of a line elsewhere.
    """
    out = draw(st.sampled_from(sources))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from((*CHAR_OPS, *line_ops)))
        if op in CHAR_OPS:
            i = draw(st.integers(0, len(out)))
            if op == "ins":
                out = out[:i] + draw(st.sampled_from(inserts)) + out[i:]
            elif i < len(out):
                out = out[:i] + (out[i] * 2 if op == "dup" else "") + out[i + 1:]
        else:
            lines = out.split("\n")
            i = draw(st.integers(0, len(lines) - 1))
            if op == "del_line":
                del lines[i]
            elif op == "dup_line":
                lines.insert(i, lines[i])
            else:
                j = draw(st.integers(0, len(lines) - 1))
                if op == "swap_lines":
                    lines[i], lines[j] = lines[j], lines[i]
                else:
                    lines.insert(i, lines[j])
            out = "\n".join(lines)
    return out
