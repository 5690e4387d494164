from __future__ import annotations

import pytest

from services.inventory.adapters.fleet_yaml import gpu_uuid, parse_fleet
from services.inventory.domain.catalog import Catalog
from services.inventory.domain.errors import FleetFileError
from tests.unit.inventory.factories import fleet_yaml, node_yaml

TWO_BY_EIGHT = fleet_yaml(
    node_yaml(hostname="gpu-a", gpus="      - {model: H100-80GB-SXM, count: 8}\n"),
    node_yaml(
        hostname="gpu-b", zone="z2", gpus="      - {model: A100-80GB, count: 8, mig: [3g.40gb, 3g.40gb]}\n"
    ),
)


def test_a_fleet_of_two_nodes_by_eight_gpus_becomes_sixteen_discovered_gpus(catalog: Catalog) -> None:
    nodes = parse_fleet(text=TWO_BY_EIGHT, catalog=catalog)
    assert [n.hostname for n in nodes] == ["gpu-a", "gpu-b"]
    assert [len(n.gpus) for n in nodes] == [8, 8]
    assert [g.index for g in nodes[0].gpus] == list(range(8))
    assert nodes[1].labels.zone == "z2"


def test_generated_facts_are_stable_across_parses(catalog: Catalog) -> None:
    assert parse_fleet(text=TWO_BY_EIGHT, catalog=catalog) == parse_fleet(text=TWO_BY_EIGHT, catalog=catalog)
    uuids = {g.uuid for n in parse_fleet(text=TWO_BY_EIGHT, catalog=catalog) for g in n.gpus}
    assert len(uuids) == 16
    assert gpu_uuid(hostname="gpu-a", index=0) in uuids


def test_nvlink_gpus_of_a_group_are_peers_of_each_other(catalog: Catalog) -> None:
    gpus = parse_fleet(text=TWO_BY_EIGHT, catalog=catalog)[0].gpus
    assert len(gpus[0].nvlink_peers) == 7
    assert gpus[0].uuid not in gpus[0].nvlink_peers


def test_gpus_without_nvlink_have_no_peers(catalog: Catalog) -> None:
    text = fleet_yaml(node_yaml(gpus="      - {model: L4, count: 4}\n"))
    assert all(g.nvlink_peers == () for g in parse_fleet(text=text, catalog=catalog)[0].gpus)


def test_mig_layouts_in_the_file_accept_pinned_slots(catalog: Catalog) -> None:
    text = fleet_yaml(node_yaml(gpus="      - {model: A100-40GB, mig: ['1g.5gb@6', 3g.20gb]}\n"))
    gpu = parse_fleet(text=text, catalog=catalog)[0].gpus[0]
    assert gpu.mig_enabled
    assert [(r.profile, r.start) for r in gpu.mig_instances] == [
        ("1g.5gb", 6),
        ("3g.20gb", None),
    ]


@pytest.mark.parametrize(
    ("gpus", "problem"),
    [
        ("      - {model: Voodoo 5, count: 1}\n", "node-a: unknown GPU model 'Voodoo 5'"),
        ("      - {model: T4, mig: [1g.5gb]}\n", "node-a: T4 does not support MIG"),
        ("      - {model: A100-40GB, mig: [4g.20gb, 4g.20gb]}\n", "4g.20gb x2 exceeds its limit"),
        ("      - {model: A100-40GB, mig: ['3g.20gb@x']}\n", "must be a number"),
        ("      - {model: T4, count: 0}\n", "count"),
    ],
)
def test_bad_entries_are_refused_naming_the_problem(catalog: Catalog, gpus: str, problem: str) -> None:
    with pytest.raises(FleetFileError, match=problem):
        parse_fleet(text=fleet_yaml(node_yaml(gpus=gpus)), catalog=catalog)


def test_a_hostname_listed_twice_is_refused(catalog: Catalog) -> None:
    node = node_yaml(gpus="      - {model: T4}\n")
    with pytest.raises(FleetFileError, match="hostname listed twice: node-a"):
        parse_fleet(text=fleet_yaml(node, node), catalog=catalog)


def test_text_that_is_not_yaml_is_refused(catalog: Catalog) -> None:
    with pytest.raises(FleetFileError, match="invalid fleet file"):
        parse_fleet(text="nodes: [unclosed", catalog=catalog)
