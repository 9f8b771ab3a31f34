"""Kueue's flavor assigner matches a pod set's nodeSelector and required node affinity
against each ResourceFlavor's nodeLabels, on the keys those labels name only (the rows of
Kueue's ``flavorassigner_test.go``: ``multiple flavors, fits a node selector`` and its
neighbours), and its untolerated taints in Kueue's words."""
from __future__ import annotations

from typing import Any, Mapping, Optional

import pytest

from placer.exceptions import InvalidInputError
from placer.model import Taint
from placer.model.affinity import Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm
from placer.queues import (
    ClusterQueue,
    FlavorQuotas,
    PodSet,
    QueueConfig,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Workload,
    load_workloads,
    pod_for_requests,
)
from placer.queues.scheduler import admit

FLAVORS = {
    "one": ResourceFlavor("one", node_labels={"type": "one"}),
    "two": ResourceFlavor("two", node_labels={"type": "two"}),
    "label-x-a": ResourceFlavor("label-x-a", node_labels={"x": "a"}),
    "label-xy-b": ResourceFlavor("label-xy-b", node_labels={"x": "b", "y": "k"}),
    "default": ResourceFlavor("default"),
    "tainted": ResourceFlavor("tainted", node_taints=(Taint(key="instance", value="spot", effect="NoSchedule"),)),
}


def expression(key: str, operator: str, *values: str) -> NodeSelectorRequirement:
    return NodeSelectorRequirement(key, operator, values)  # type: ignore[arg-type]


def required(*terms: tuple[NodeSelectorRequirement, ...], fields: tuple[NodeSelectorRequirement, ...] = ()
             ) -> Affinity:
    return Affinity(node_affinity=NodeAffinity(NodeSelector(tuple(
        NodeSelectorTerm(match_expressions=t, match_fields=fields) for t in terms))))


def cycle(flavors: tuple[str, ...], node_selector: Mapping[str, str] = {},
          affinity: Optional[Affinity] = None) -> tuple[Optional[str], str]:
    """The flavor the pod set takes (None: pending) and the pending reason."""
    queue = ClusterQueue("cq", (ResourceGroup(("cpu",), tuple(FlavorQuotas(f, {"cpu": ResourceQuota(4000)})
                                                               for f in flavors)),))
    config = QueueConfig(flavors=FLAVORS, cluster_queues={"cq": queue})
    pod = pod_for_requests("main", {"cpu": 1000}, node_selector=node_selector, affinity=affinity)
    wl = Workload("w", (PodSet("main", 1, {"cpu": 1000}, pod),), namespace="ns", cluster_queue="cq")
    result = admit(None, config, [wl])
    if result.admitted:
        return result.admitted[0].flavors["main"]["cpu"], ""
    return None, result.pending[0].reason


def test_a_selector_key_no_flavor_names_is_ignored() -> None:
    # "multiple flavors, fits a node selector": ignored1 and ignored2 are no flavor's label
    got = cycle(("one", "two"), {"type": "two", "ignored1": "foo"}, required((expression("ignored2", "In", "bar"),)))
    assert got == ("two", "")


def test_required_affinity_on_a_flavor_label_picks_the_flavor() -> None:
    # "multiple flavors, fits with node affinity"
    assert cycle(("one", "two"), {"ignored1": "foo"}, required((expression("type", "In", "two"),))) == ("two", "")
    assert cycle(("one", "two"), affinity=required((expression("type", "NotIn", "one"),))) == ("two", "")
    assert cycle(("one", "two"), affinity=required((expression("type", "DoesNotExist"),))) == (None, (
        "flavor one doesn't match node affinity; flavor two doesn't match node affinity"))


def test_a_term_left_empty_matches_every_flavor() -> None:
    # "multiple flavors, node affinity fits any flavor": the first term names no flavor
    # label, so (ORed) the affinity matches any flavor
    terms = required((expression("ignored2", "In", "bar"),), (expression("cpuType", "In", "two"),))
    assert cycle(("one", "two"), affinity=terms) == ("one", "")
    # matchFields are dropped too: a term of fields alone is such an empty term
    by_name = required((), fields=(expression("metadata.name", "In", "node-b"),))
    assert cycle(("one", "two"), affinity=by_name) == ("one", "")
    with_type = required((expression("type", "In", "two"),), fields=(expression("metadata.name", "In", "node-b"),))
    assert cycle(("one", "two"), affinity=with_type) == ("two", "")


def test_each_flavor_is_read_on_its_own_keys() -> None:
    # "multiple flavors with different label keys, selector only uses flavor's own keys"
    assert cycle(("label-x-a", "label-xy-b"), {"x": "a", "y": "g"}) == ("label-x-a", "")
    assert cycle(("label-xy-b", "label-x-a"), {"x": "a", "y": "g"}) == ("label-x-a", "")
    # "labelless flavor in group with labeled flavor, workload uses labeled selector"
    assert cycle(("default", "two"), {"type": "two"}) == ("default", "")


def test_no_flavor_matches_the_affinity() -> None:
    # "multiple flavors, doesn't fit node affinity"
    got = cycle(("one", "two"), affinity=required((expression("type", "In", "three"),)))
    assert got == (None, "flavor one doesn't match node affinity; flavor two doesn't match node affinity")


def test_an_untolerated_taint_in_kueues_words() -> None:
    got = cycle(("tainted", "one"), {"type": "two"})
    assert got == (None, "untolerated taint {instance spot NoSchedule <nil>} in flavor tainted; "
                         "flavor one doesn't match node affinity")


def kueue_workload(spec: dict[str, Any]) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
                         **spec}}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w", "namespace": "ns"},
            "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": template}]}}


AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "type", "operator": "In", "values": ["two"]}]}]}}}


SPREAD = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
           "labelSelector": {"matchLabels": {"app": "a"}}}]


def test_the_importer_reads_the_templates_affinity_and_spread() -> None:
    (wl,) = load_workloads(kueue_workload({"affinity": AFFINITY, "topologySpreadConstraints": SPREAD}))
    pod = wl.pod_sets[0].pod
    assert pod.affinity == required((expression("type", "In", "two"),))
    ((spread),) = pod.topology_spread_constraints
    assert (spread.max_skew, spread.topology_key, spread.when_unsatisfiable) == (1, "zone", "DoNotSchedule")


@pytest.mark.parametrize("affinity, where", [
    ({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "type", "operator": "In"}]}]}}},
     "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
     ".matchExpressions[0].values: operator In needs values"),
    ({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "zone", "namespaceSelector": {"matchLabels": {"team": "a"}}}]}},
     "affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaceSelector: "),
    ({"nodeAffinity": {"required": {}}}, 'affinity.nodeAffinity: unknown field "required"'),
])
def test_the_importer_refuses_an_affinity_a_pod_could_not_have(affinity: dict[str, Any], where: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        load_workloads(kueue_workload({"affinity": affinity}))
    assert info.value.where == "objects[0]: spec.podSets[0].template.spec"
    assert info.value.what.startswith(where), info.value


def test_the_importer_refuses_a_spread_a_pod_could_not_have() -> None:
    with pytest.raises(InvalidInputError) as info:
        load_workloads(kueue_workload({"topologySpreadConstraints": [{**SPREAD[0], "maxSkew": 0}]}))
    assert info.value.where == "objects[0]: spec.podSets[0].template.spec"
    assert info.value.what.startswith("topologySpreadConstraints[0].maxSkew: "), info.value
