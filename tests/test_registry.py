"""The policy registry (placer.policies): its records, its one check, and that the rest of
placer reads it."""
from __future__ import annotations

import dataclasses
import math

import pytest

from placer import policies, schema
from placer.exceptions import InvalidInputError
from placer.model import POLICIES
from placer.policies import REGISTRY, Policy

ODD_VALUES = [
    "worst-fit", "", "x" * 61, "Best-Fit", " best-fit", None, True, False, 0, 7, 10**50, -3,
    1.5, math.inf, [], ["fgd"], (), {}, {"policy": "fgd"}, object(), b"fgd",
]


def test_names_in_registry_order():
    assert policies.names() == tuple(REGISTRY)
    assert policies.names() == (
        "best-fit", "first-fit", "spread", "random", "fgd", "dot-product", "gpu-packing",
        "gpu-clustering", "fgd-pack", "kube", "kube-most-allocated", "kube-requested-to-capacity-ratio",
    )
    assert POLICIES == policies.names()
    assert policies.kernel_names() == policies.names()[:9]


def test_records_are_frozen_and_named_by_their_key():
    for name, record in REGISTRY.items():
        assert isinstance(record, Policy) and record.name == name
        assert record.summary and "\n" not in record.summary
        with pytest.raises(dataclasses.FrozenInstanceError):
            record.code = 99  # type: ignore[misc]
    with pytest.raises(TypeError):
        REGISTRY["new"] = REGISTRY["fgd"]  # type: ignore[index]


def test_codes_are_distinct():
    codes = [p.code for p in REGISTRY.values() if p.kernel]
    assert len(set(codes)) == len(codes)
    assert sorted(codes) == list(range(len(codes)))
    # a kube-scored policy borrows best-fit's kernel code for GPUs inside the chosen node
    assert {p.code for p in REGISTRY.values() if not p.kernel} == {REGISTRY["best-fit"].code}


def test_flags_of_the_known_policies():
    def having(flag: str) -> set[str]:
        return {p.name for p in REGISTRY.values() if getattr(p, flag)}

    assert having("needs_workload") == {"fgd", "fgd-pack"}
    assert having("needs_packing_guide") == {"fgd-pack"}
    assert having("ranked") == {"fgd", "dot-product", "gpu-packing", "gpu-clustering", "fgd-pack"}
    assert having("cached") == {"fgd", "fgd-pack"}
    assert having("study") == {"fgd", "best-fit", "gpu-packing", "gpu-clustering", "dot-product", "random"}
    assert having("kube_scoring") == {"kube", "kube-most-allocated", "kube-requested-to-capacity-ratio"}


def test_flags_are_consistent():
    for p in REGISTRY.values():
        if p.needs_packing_guide:
            assert p.needs_workload, p.name  # fgd-pack's measure extends fgd's
        if p.study:
            assert p.simulate_rank is not None, p.name
    ranks = [p.simulate_rank for p in REGISTRY.values() if p.simulate_rank is not None]
    assert sorted(ranks) == list(range(len(ranks)))


@pytest.mark.parametrize("name", list(REGISTRY))
def test_get_returns_the_record(name):
    assert policies.get(name) is REGISTRY[name]
    assert policies.get(name, "--policy") is REGISTRY[name]
    assert schema.check_policy(name, "--policy") == name


@pytest.mark.parametrize("value", ODD_VALUES, ids=repr)
def test_get_refuses_with_the_input_checks_message(value):
    with pytest.raises(InvalidInputError) as err:
        policies.get(value, "spec.policy")
    assert err.value.where == "spec.policy"
    expected = schema.errors.bad("spec.policy", "one of " + ", ".join(REGISTRY), value)
    assert str(err.value) == str(expected)
    assert err.value.what == expected.what
    assert err.value.what.startswith("expected one of best-fit, first-fit, spread, random, fgd, ")


def test_get_message_by_hand():
    with pytest.raises(InvalidInputError) as err:
        policies.get("x")
    assert str(err.value) == (
        "policy: expected one of best-fit, first-fit, spread, random, fgd, dot-product, gpu-packing, "
        "gpu-clustering, fgd-pack, kube, kube-most-allocated, kube-requested-to-capacity-ratio, got 'x' (a string)"
    )


def test_check_policy_delegates_to_the_registry():
    for value in ODD_VALUES:
        with pytest.raises(InvalidInputError) as mine:
            schema.check_policy(value, "--policy")
        with pytest.raises(InvalidInputError) as theirs:
            policies.get(value, "--policy")
        assert str(mine.value) == str(theirs.value)


def test_policies_sits_at_the_bottom_of_the_import_graph():
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(policies))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
    assert {m for m in imported if m.split(".")[0] == "placer"} == {"placer.exceptions", "placer.text.messages"}


def test_registry_codes_are_the_kernel_enum():
    from placer.kernel import PolicyCode

    # each policy's code is the kernel's POLICY_<NAME>, and no enum value is left without a policy
    kernel = {code.name: int(code) for code in PolicyCode}
    mine = {"POLICY_" + p.name.upper().replace("-", "_"): p.code for p in REGISTRY.values() if p.kernel}
    assert sorted(set(kernel) - set(mine)) == [], "kernel enum values missing from the registry"
    assert sorted(set(mine) - set(kernel)) == [], "registry policies missing from the kernel enum"
    assert mine == kernel
    assert len(set(kernel.values())) == len(kernel)


def test_simulate_lists_come_from_the_registry_in_table_order():
    from placer.replay import simulate, study

    assert study.STUDY_POLICIES == ("fgd", "best-fit", "gpu-packing", "gpu-clustering", "dot-product", "random")
    assert study.ALL_POLICIES == ("fgd-pack",) + study.STUDY_POLICIES
    assert simulate.available_policies() == policies.names()
    assert set(study.PUBLISHED_NAMES) == set(study.STUDY_POLICIES)
    assert study.PUBLISHED_NAMES["best-fit"] == "05-BestFit" and study.PUBLISHED_NAMES["fgd"] == "06-FGD"


def test_testing_draws_every_policy():
    from placer import testing

    assert testing.GREEDY_POLICIES == policies.kernel_names()


def test_cli_policy_options_list_every_policy():
    import argparse

    from placer import cli

    parser = cli.build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    imports = next(a for a in commands["import"]._actions if isinstance(a, argparse._SubParsersAction)).choices
    listing = ", ".join(policies.names())
    for command in (commands["place"], commands["demo"], imports["kubernetes-request"]):
        option = next(a for a in command._actions if "--policy" in a.option_strings)
        assert listing in option.help


def _tiny_snapshot():
    from placer.model import ClusterSnapshot, Node, NodeType

    return ClusterSnapshot(nodes=(Node(name="n0", hardware=NodeType(gpus=2, gpu_model="G", cpu_milli=8000)),))


def test_a_hand_built_request_with_an_unknown_policy_is_refused_with_the_one_message():
    from placer.placement.cluster import Cluster
    from placer.model import PlacementRequest, PodRequest

    request = PlacementRequest(pods=(PodRequest("a", gpus=1),), policy="worst-fit")
    with pytest.raises(InvalidInputError) as err:
        Cluster(_tiny_snapshot()).schedule(request)
    assert str(err.value) == str(schema.errors.bad("policy", "one of " + ", ".join(REGISTRY), "worst-fit"))


def test_entry_points_take_a_name_or_a_record():
    import placer
    from placer.placement.cluster import Cluster
    from placer.model import PlacementRequest, PodRequest

    pods = [PodRequest("a", gpus=1), PodRequest("b", gpus=1, gpu_milli=500)]
    by_name, _ = Cluster(_tiny_snapshot()).replay(pods, "fgd", seed=3)
    by_record, _ = Cluster(_tiny_snapshot()).replay(pods, REGISTRY["fgd"], seed=3)
    assert by_name == by_record
    with pytest.raises(InvalidInputError, match="expected one of best-fit"):
        Cluster(_tiny_snapshot()).replay(pods, "tetris")
    request = PlacementRequest(pods=tuple(pods))
    assert placer.place(_tiny_snapshot(), request, policy=REGISTRY["spread"]) == placer.place(
        _tiny_snapshot(), request, policy="spread"
    )
    with pytest.raises(InvalidInputError, match="^policy: expected one of best-fit"):
        placer.place(_tiny_snapshot(), request, policy="tetris")


def test_the_reference_implements_every_registry_policy():
    import reference

    assert reference.GREEDY_POLICIES == policies.kernel_names()
    missing = [p for p in policies.kernel_names() if p not in reference.IMPLEMENTED_POLICIES]
    assert missing == [], f"tests/reference.py has no implementation of {missing}"
    assert sorted(reference.IMPLEMENTED_POLICIES) == sorted(policies.kernel_names())
    ranked = {p.name for p in REGISTRY.values() if p.ranked}
    assert set(reference.RANKED_POLICIES) == ranked


@pytest.mark.parametrize("name", policies.kernel_names())
def test_the_reference_and_the_cluster_run_every_policy(name):
    from reference import ReferenceCluster

    from placer.placement.cluster import Cluster
    from placer.model import PlacementRequest, PodRequest

    pods = (PodRequest("a", gpus=1), PodRequest("b", gpus=1, gpu_milli=400), PodRequest("c", cpu_milli=100))
    request = PlacementRequest(pods=pods, policy=name, seed=7)
    got = Cluster(_tiny_snapshot()).schedule(request)
    want = ReferenceCluster(_tiny_snapshot()).schedule(request)
    assert got == want
    assert len(got.assignments) == 3


def test_the_kernel_refuses_a_code_that_is_no_policy():
    import numpy as np

    import dataclasses

    from placer.placement.cluster import Cluster
    from placer.model import PodRequest

    session = Cluster(_tiny_snapshot()).session
    pods = [PodRequest("a", gpus=1)]
    bad = dataclasses.replace(REGISTRY["best-fit"], code=max(p.code for p in REGISTRY.values()) + 1)
    rng = np.zeros(1, dtype=np.uint64)
    with pytest.raises(ValueError, match="unknown policy code"):
        session.place(pods, bad, rng)
    with pytest.raises(ValueError, match="unknown policy code"):
        session.place_on(pods, [0], bad, rng)
    with pytest.raises(ValueError, match="unknown policy code"):
        session.node_scores(pods[0], bad)


@pytest.mark.parametrize("name", [p.name for p in REGISTRY.values() if p.ranked])
def test_a_scored_policy_that_is_not_ranked_ties_to_the_lowest_index(name, monkeypatch):
    """A scored policy need not be ranked: without the flag its ties go to the lowest node
    index, in the kernel and in the reference alike (the reference used to fail with a
    KeyError on the seeded order it had not drawn)."""
    import reference
    from reference import ReferenceCluster

    from placer.placement.cluster import Cluster
    from placer.model import ClusterSnapshot, Node, NodeType, PlacementRequest, PodRequest

    unranked = dataclasses.replace(REGISTRY[name], ranked=False)
    monkeypatch.setattr(policies, "REGISTRY", {**REGISTRY, name: unranked})
    monkeypatch.setattr(reference, "RANKED_POLICIES", tuple(p for p in reference.RANKED_POLICIES if p != name))
    hardware = NodeType(gpus=2, gpu_model="G", cpu_milli=8000)
    snapshot = ClusterSnapshot(nodes=tuple(Node(name=f"n{i}", hardware=hardware) for i in range(6)))
    request = PlacementRequest(pods=(PodRequest("a", gpus=1),), policy=name, seed=3)
    want = ReferenceCluster(snapshot).schedule(request)
    assert [a.node for a in want.assignments] == ["n0"]  # six equal nodes: the lowest index
    assert Cluster(snapshot).schedule(request) == want
