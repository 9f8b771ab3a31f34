"""Type stubs of the compiled quick readers of the schema (``_quick.pyx``)."""
from typing import Any, Callable, Optional

from placer.model import EMPTY as EMPTY
from placer.model import Node, PodRequest, RunningPod
from placer.schema.documents import PodDoc

__test__: dict[str, str]  # Cython's doctest table
SUMMED_POD_FIELDS: tuple[str, ...]

def finish_nodes(
    nodes: list[Node],
    plain: dict[Any, Any],
    empty: tuple[Any, ...],
    level_set: Any,
    exact_node: Callable[[Node, int], Any],
    check_names: bool,
    at: list[int],
) -> bool: ...
def common_pods(
    entries: list[PodDoc],
    milli: int,
    copied: tuple[str, ...],
    targets: tuple[str, ...],
    defaulted: tuple[str, ...],
    defaults: tuple[Any, ...],
    template: PodRequest,
) -> Optional[list[PodRequest]]: ...
def dict_pods(
    entries: list[Any],
    columns: dict[str, int],
    targets: tuple[str, ...],
    low: tuple[int, ...],
    high: tuple[int, ...],
    name_min: int,
    milli: int,
    template: PodRequest,
    gpus_column: int,
    milli_column: int,
) -> Optional[list[PodRequest]]: ...
def dict_nodes(
    entries: list[Any],
    node_columns: dict[str, int],
    pod_columns: dict[str, int],
    node_template: Node,
    pod_template: RunningPod,
    name_min: int,
    bounds: tuple[int, ...],
) -> Optional[list[Node]]: ...
