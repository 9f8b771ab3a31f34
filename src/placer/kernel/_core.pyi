import enum
from typing import Any

import numpy as np
import numpy.typing as npt
from typing_extensions import disjoint_base

KERNEL_ABI: int
MAX_TABLE_GPUS: int
class PolicyCode(enum.IntEnum):
    """The kernel's policy codes (as declared in ``_core.pxd``; stubtest checks the two agree)."""

    POLICY_FIRST_FIT = 0
    POLICY_BEST_FIT = 1
    POLICY_SPREAD = 2
    POLICY_RANDOM = 3
    POLICY_FGD = 4
    POLICY_DOT_PRODUCT = 5
    POLICY_GPU_PACKING = 6
    POLICY_GPU_CLUSTERING = 7
    POLICY_FGD_PACK = 8

@disjoint_base
class PodBatch:
    size: int
    arrays: tuple[npt.NDArray[Any], ...]
    def __init__(
        self,
        gpus: npt.NDArray[np.int32],
        milli: npt.NDArray[np.int32],
        gpu_mem: npt.NDArray[np.int32],
        cpu: npt.NDArray[np.int64],
        mem: npt.NDArray[np.int64],
        nics: npt.NDArray[np.int32],
        models: npt.NDArray[np.uint64],
        klass: npt.NDArray[np.int32],
        group_end: npt.NDArray[np.int32],
        eligible: npt.NDArray[np.uint64],
    ) -> None: ...
    @property
    def gpus(self) -> npt.NDArray[np.int32]: ...
    @property
    def klass(self) -> npt.NDArray[np.int32]: ...
    def shape_columns(self) -> npt.NDArray[np.int64]: ...

@disjoint_base
class Relations:
    arrays: dict[str, npt.NDArray[Any]]
    def __init__(self, arrays: dict[str, npt.NDArray[Any]], n_nodes: int, n_words: int) -> None: ...
    @property
    def n_pods(self) -> int: ...
    def passes(self, pod: int, node: int) -> int: ...
    def failures(self, pod: int) -> npt.NDArray[np.int32]: ...
    def add(self, pod: int, node: int, sign: int) -> None: ...

@disjoint_base
class Kernel:
    def __init__(self, arrays: dict[str, npt.NDArray[Any]], n_models: int) -> None: ...
    def set_gpu_tables(
        self,
        kind: int,
        k: int,
        pair: npt.NDArray[np.int32],
        score: npt.NDArray[np.int32],
        split: npt.NDArray[np.int32],
        choice: npt.NDArray[np.uint16],
        top: int,
    ) -> None: ...
    def has_gpu_tables(self, kind: int, k: int) -> bool: ...
    def set_workload(
        self,
        types: dict[str, npt.NDArray[Any]],
        node_frag: npt.NDArray[np.float64],
        fit: npt.NDArray[np.int32],
        small: npt.NDArray[np.int64],
    ) -> None: ...
    def set_packing(
        self,
        cpu_per_gpu: float,
        regret: npt.NDArray[np.float64],
        pressure: npt.NDArray[np.float64],
        regret_weight: float,
        pressure_weight: float,
    ) -> None: ...
    def fragment_total(self) -> float: ...
    def set_nics(self, kind: int, classes: npt.NDArray[np.uint64]) -> None: ...
    def place_batch(
        self,
        pods: PodBatch,
        policy: int,
        rng: npt.NDArray[np.uint64],
        restrict: npt.NDArray[np.uint64] | None = ...,
        reasons: bool = ...,
        rank: npt.NDArray[np.int32] | None = ...,
        frag_trace: npt.NDArray[np.float64] | None = ...,
        shapes: npt.NDArray[np.int32] | None = ...,
        cache: tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]] | None = ...,
        relations: Relations | None = ...,
        relations_from: int = ...,
    ) -> tuple[
        npt.NDArray[np.int32],
        npt.NDArray[np.uint64],
        npt.NDArray[np.int32],
        npt.NDArray[np.int32],
        npt.NDArray[np.uint64],
    ]: ...
    def node_scores(self, pods: PodBatch, policy: int) -> npt.NDArray[np.int64]: ...
    def place_on(
        self,
        pods: PodBatch,
        node_of_pod: npt.NDArray[np.int32],
        policy: int,
        rng: npt.NDArray[np.uint64] | None = ...,
        relations: Relations | None = ...,
    ) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64], int]: ...
    def bind(
        self,
        node: int,
        milli: int,
        gpu_mem: int,
        cpu: int,
        mem: int,
        gpu_mask: int,
        sign: int,
        pod_slots: int,
        share: bool,
    ) -> None: ...

def derive_free_state(arrays: dict[str, npt.NDArray[Any]], untracked: int) -> None: ...
def gpu_subset_scores(pair: npt.NDArray[np.int32]) -> npt.NDArray[np.int32]: ...
def gpu_split_table(score: npt.NDArray[np.int32], n: int, k: int) -> npt.NDArray[np.int32]: ...
def gpu_choice_tables(
    score: npt.NDArray[np.int32], split: npt.NDArray[np.int32], pair: npt.NDArray[np.int32], k: int
) -> tuple[npt.NDArray[np.uint16], npt.NDArray[np.uint16]]: ...
def gpu_choose(
    score: npt.NDArray[np.int32],
    split: npt.NDArray[np.int32],
    pair: npt.NDArray[np.int32],
    k: int,
    free_mask: int,
    required: int,
    objective: int,
) -> int: ...
