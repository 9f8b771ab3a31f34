"""Reader of ``nvidia-smi topo -m`` (and ``topo -mp``) output files.

The matrix grammar lives in :mod:`placer.model.topo_matrix`, since snapshots embed the same
text (``gpuTopology.nvidiaSmiTopo``); this adapter reads it from files and re-exports
:class:`~placer.model.topo_matrix.TopoMatrix` and :func:`~placer.model.topo_matrix.parse_topo_matrix`.
"""

from __future__ import annotations

import os
from typing import Union

from placer.text.files import read_text
from placer.model.topo_matrix import TopoMatrix, parse_topo_matrix

__all__ = ["TopoMatrix", "parse_topo_matrix", "parse_topo_file"]

PathLike = Union[str, "os.PathLike[str]"]


def parse_topo_file(path: PathLike) -> TopoMatrix:
    """Read a UTF-8 file of ``nvidia-smi topo -m`` output and parse it.

    Parameters
    ----------
    path : str or os.PathLike
        The file. Its base name is the ``source`` of error locations.

    Returns
    -------
    TopoMatrix
        As :func:`placer.model.topo_matrix.parse_topo_matrix`.

    Raises
    ------
    InvalidInputError
        ``where`` = the path with ``what`` = ``"no such file"`` when it does not exist
        (or another reason it cannot be read); ``"<name>:<line>"`` for text that is not
        UTF-8 or does not parse.
    """
    name = os.path.basename(os.fspath(path))
    text = read_text(path, source=name)
    return parse_topo_matrix(text, name)
