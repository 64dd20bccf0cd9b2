"""core.catalog.fabric: the NCCL transport verdict, the published busbw figures and nccl-tests' busbw formula."""

from __future__ import annotations

import pytest

from core.catalog import fabric
from core.catalog.fabric import DEGRADED, fabric_verdict


@pytest.mark.parametrize("mode", ["check", "strict"])
def test_sockets_on_an_efa_group_are_degraded_and_strict_fails_them(mode):
    v = fabric_verdict("NET/Socket", efa_expected=True, framework="pytorch", mode=mode)
    assert (v.verdict, v.flag, v.fails) == (DEGRADED, DEGRADED, mode == "strict")


def test_one_node_on_sockets_among_nodes_on_efa_is_enough():
    v = fabric_verdict(["NET/OFI", "NET/Socket"], efa_expected=True, framework="pytorch", mode="strict")
    assert v.verdict == DEGRADED and v.fails


def test_efa_passes_in_both_modes():
    for mode in fabric.FABRIC_MODES:
        v = fabric_verdict("NET/OFI", efa_expected=True, framework="pytorch", mode=mode)
        assert (v.verdict, v.flag, v.fails) == ("EFA (NET/OFI)", None, False)


def test_no_nccl_line_is_unverified_and_only_strict_fails_it():
    check = fabric_verdict(None, efa_expected=True, framework="pytorch", mode="check")
    strict = fabric_verdict(None, efa_expected=True, framework="pytorch", mode="strict")
    assert check.verdict.startswith("unverified") and check.flag is None and not check.fails
    assert strict.fails and strict.flag.startswith("fabric unverified")


@pytest.mark.parametrize("efa, framework", [(False, "pytorch"), (True, "tensorflow")])
def test_no_efa_group_or_another_framework_is_not_judged(efa, framework):
    v = fabric_verdict("NET/Socket", efa_expected=efa, framework=framework, mode="strict")
    assert v.verdict.startswith("not checked") and v.flag is None and not v.fails


def test_busbw_formula_against_the_published_2_x_p4de_row():
    # awsome-distributed-training's 2 x p4de.24xlarge run (16 ranks), 2 GiB: 51406 us, algbw 41.78, busbw 78.33.
    # The printed time is rounded to the microsecond, so the bandwidths agree to about 0.01 GB/s.
    algbw = 2147483648 / 1e9 / 51406e-6  # by hand: 41.775
    assert algbw == pytest.approx(41.78, abs=0.01)
    assert round(fabric.bus_bandwidth(algbw, 16), 2) == 78.33  # 41.775 x 2 x 15 / 16
    assert fabric.bus_bandwidth(10.0, 2) == 10.0 and fabric.bus_bandwidth(10.0, 8) == 17.5


def test_a_run_below_the_set_fraction_of_the_published_figure_is_flagged():
    curve = [(2**29, 70.0), (2**30, 60.0)]  # 1 GiB is the largest size both have: 60 of 76.79
    check = fabric.busbw_check(curve, instance_type="p4de.24xlarge", nodes=2)
    assert check["compared_at_bytes"] == 2**30 and check["expected_gbps"] == 76.79
    assert check["fraction"] == round(60 / 76.79, 4) and check["below"] is True
    assert "awsome-distributed-training" in check["source"]
    assert fabric.below_expected_flag(check) == f"busbw below expected (60 of 76.79 GB/s at {2**30} B)"
    fine = fabric.busbw_check([(2**31, 440.0)], instance_type="p5.48xlarge", nodes=2)
    assert fine["below"] is False and fabric.below_expected_flag(fine) is None


def test_no_published_figure_or_no_common_size_flags_nothing():
    none = fabric.busbw_check([(2**30, 1.0)], instance_type="g5.48xlarge", nodes=2)
    assert none["below"] is None and "no published" in none["note"]
    small = fabric.busbw_check([(2**20, 1.0)], instance_type="p5.48xlarge", nodes=2)
    assert small["below"] is None and "no measured size" in small["note"]
