from typing import Any

import numpy as np
import numpy.typing as npt

class Kernel:
    def __init__(self, arrays: dict[str, npt.NDArray[Any]], n_models: int) -> None: ...
    def place_batch(
        self,
        pods: dict[str, npt.NDArray[Any]],
        policy: int,
        rng: npt.NDArray[np.uint64],
        eligible: npt.NDArray[np.uint64],
        restrict: npt.NDArray[np.uint64] | None = ...,
        reasons: bool = ...,
    ) -> tuple[
        npt.NDArray[np.int32], npt.NDArray[np.uint64], npt.NDArray[np.int32], npt.NDArray[np.int32]
    ]: ...
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
