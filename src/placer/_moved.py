"""Module paths of earlier releases, kept importable: ``import placer.cluster`` is
``placer.placement.cluster`` (issue #31 grouped the modules by concern).

An old path is the new module itself (one object in :data:`sys.modules` under both names),
so patching or pickling through either name acts on the same module. The packages that
took an old module's name (``placer.exact``, ``placer.preemption``, ``placer.diagnostics``,
``placer.serve``, ``placer.adapters.kubernetes``/``kueue``/``nvidia_smi``/``slurm``)
re-export that module's public names instead.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

__all__ = ["MOVED", "install"]

MOVED: dict[str, str] = {
    "placer._io": "placer.text.files",
    "placer.adapters.kube_extender": "placer.serve.extender",
    "placer.adapters.kube_live": "placer.adapters.kubernetes.live",
    "placer.adapters.kubernetes_documents": "placer.adapters.kubernetes.documents",
    "placer.adapters.kubernetes_mig": "placer.adapters.kubernetes.mig",
    "placer.adapters.kubernetes_scheduling": "placer.adapters.kubernetes.scheduling",
    "placer.adapters.kubernetes_sharing": "placer.adapters.kubernetes.sharing",
    "placer.adapters.kubernetes_workloads": "placer.adapters.kubernetes.workloads",
    "placer.adapters.kueue_fields": "placer.adapters.kueue.fields",
    "placer.adapters.kueue_queues": "placer.adapters.kueue.queues",
    "placer.adapters.kueue_workloads": "placer.adapters.kueue.workloads",
    "placer.adapters.nvidia_smi_list": "placer.adapters.nvidia_smi.listing",
    "placer.adapters.nvidia_smi_live": "placer.adapters.nvidia_smi.live",
    "placer.adapters.nvidia_smi_mig": "placer.adapters.nvidia_smi.mig",
    "placer.adapters.nvidia_smi_query": "placer.adapters.nvidia_smi.query",
    "placer.adapters.slurm_jobs": "placer.adapters.slurm.jobs",
    "placer.adapters.slurm_live": "placer.adapters.slurm.live",
    "placer.adapters.slurm_status": "placer.adapters.slurm.status",
    "placer.adapters.slurm_values": "placer.adapters.slurm.values",
    "placer.cluster": "placer.placement.cluster",
    "placer.defrag": "placer.preemption.defrag",
    "placer.demo": "placer.cli.demo",
    "placer.domains": "placer.model.domains",
    "placer.executors": "placer.replay.executors",
    "placer.explain": "placer.diagnostics.explain",
    "placer.fragmentation": "placer.workload.fragmentation",
    "placer.gangs": "placer.placement.gangs",
    "placer.gpusets": "placer.placement.gpusets",
    "placer.hostlist": "placer.text.hostlist",
    "placer.messages": "placer.text.messages",
    "placer.mig_exact": "placer.mig.exact",
    "placer.mig_gangs": "placer.mig.gangs",
    "placer.mig_layout": "placer.mig.layout",
    "placer.mig_plans": "placer.mig.plans",
    "placer.mig_profiles": "placer.model.mig_profiles",
    "placer.moves": "placer.preemption.moves",
    "placer.node_labels": "placer.model.labels",
    "placer.order": "placer.placement.order",
    "placer.packing": "placer.workload.packing",
    "placer.place": "placer.placement.place",
    "placer.preemption_exact": "placer.preemption.exact",
    "placer.queues.arrivals": "placer.replay.arrivals",
    "placer.queues.metrics": "placer.replay.metrics",
    "placer.queues.timeline": "placer.replay.timeline",
    "placer.queues.timeline_queues": "placer.replay.timeline_queues",
    "placer.reasons": "placer.model.reasons",
    "placer.reconcile": "placer.diagnostics.reconcile",
    "placer.report": "placer.diagnostics.report",
    "placer.sharing": "placer.placement.sharing",
    "placer.simulate": "placer.replay.simulate",
    "placer.sweep": "placer.replay.sweep",
    "placer.textlines": "placer.text.lines",
    "placer.topo_matrix": "placer.model.topo_matrix",
    "placer.topo_report": "placer.diagnostics.topology",
    "placer.topology": "placer.model.topology",
}


class _OldPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old module path and loads it as the module that now holds it."""

    def __init__(self) -> None:
        self._own_specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(MOVED[spec.name])
        self._own_specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system stamped the alias's spec on the module: give it back its own.
        alias = module.__spec__.name if module.__spec__ is not None else ""
        if alias in self._own_specs:
            module.__spec__ = self._own_specs.pop(alias)


def install() -> None:
    """Make the old module paths importable (once per interpreter).

    ``placer.place`` and ``placer.defrag`` were modules and are the package's functions of
    the same name: those paths are filed under the modules now holding them right away, so
    that importing one finds it loaded and does not put the module in the function's place
    on the package (as importing a module for the first time does).
    """
    if any(isinstance(finder, _OldPaths) for finder in sys.meta_path):
        return
    package = sys.modules["placer"]
    for old, new in MOVED.items():
        parent, leaf = old.rsplit(".", 1)
        if parent == "placer" and callable(getattr(package, leaf, None)):
            sys.modules.setdefault(old, importlib.import_module(new))
    sys.meta_path.append(_OldPaths())
