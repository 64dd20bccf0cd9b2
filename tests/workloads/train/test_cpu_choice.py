"""CPU runs choose precision and memory format by what the CPU does well (workloads.train.common.cpu_choice)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from workloads.train.common.cpu_choice import (
    FORCE_BF16_ENV,
    CpuChoice,
    CpuFacts,
    Measured,
    channels_last_for,
    choose,
    forced,
    parse_cpuinfo,
    precision_on,
    read_cpu_facts,
)

# A 2-core AMD EPYC (AVX2, no AVX-512) and a Sapphire Rapids (AVX-512 BF16 and AMX), as /proc/cpuinfo shows them.
EPYC = parse_cpuinfo("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse sse2 avx avx2 fma f16c\n")
SPR = parse_cpuinfo("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8488C\n"
                    "flags\t\t: avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n")


def test_cpuinfo_is_read_into_flags_and_model():
    assert EPYC.model == "AMD EPYC" and "avx2" in EPYC.flags and not EPYC.native_bf16
    assert SPR.native_bf16 and "bf16 via AMX" in SPR.describe()
    assert "AVX2, no bf16 instructions" in EPYC.describe()


def test_unreadable_cpuinfo_means_no_bf16(tmp_path):
    facts = read_cpu_facts(tmp_path / "absent", {})
    assert facts == CpuFacts() and choose("amp-fp16", True, facts).precision == "fp32"


@pytest.mark.parametrize("asked", ["amp-fp16", "bf16"])
def test_mixed_precision_is_fp32_without_bf16_instructions(asked):
    c = choose(asked, True, EPYC)
    assert (c.precision, c.channels_last) == ("fp32", False)
    assert any(f"{asked} -> fp32" in w and "no bf16 instructions" in w for w in c.why)


def test_mixed_precision_is_bf16_with_bf16_instructions():
    c = choose("amp-fp16", True, SPR)
    assert (c.precision, c.channels_last) == ("bf16", False)
    assert choose("bf16", False, SPR) == CpuChoice("bf16", False, ())


def test_fp32_and_contiguous_stay_as_asked():
    assert choose("fp32", False, EPYC).why == () and choose("fp32", False, SPR).precision == "fp32"


def test_channels_last_only_off_the_cpu():
    assert channels_last_for("cuda", True) and not channels_last_for("cuda", False)
    assert not channels_last_for("cpu", True)
    assert any("channels_last -> contiguous" in w for w in choose("fp32", True, EPYC).why)


# EKSBENCH_CPU_BF16 makes one machine answer as either kind of CPU (.ci/run checks both kinds this way).
def test_the_override_adds_or_hides_bf16_instructions():
    on, off = forced(EPYC, "1"), forced(SPR, "0")
    assert on.native_bf16 and choose("amp-fp16", False, on).precision == "bf16"
    assert f"bf16 instructions forced by {FORCE_BF16_ENV}=1" in on.describe()
    assert not off.native_bf16 and choose("amp-fp16", False, off).precision == "fp32"
    assert "amx_tile" in off.flags and f"hidden by {FORCE_BF16_ENV}=0" in off.describe()
    assert forced(SPR, None) == SPR == forced(SPR, "")


def test_read_cpu_facts_honours_the_override(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("model name\t: AMD EPYC\nflags\t\t: avx2\n")
    assert not read_cpu_facts(cpuinfo, {}).native_bf16
    assert read_cpu_facts(cpuinfo, {FORCE_BF16_ENV: "1"}).native_bf16
    assert not read_cpu_facts(cpuinfo, {FORCE_BF16_ENV: "0"}).native_bf16
    assert read_cpu_facts(tmp_path / "absent", {FORCE_BF16_ENV: "1"}).native_bf16


def test_a_bad_override_names_the_variable_the_value_and_the_choices():
    with pytest.raises(ValueError, match=rf"^{FORCE_BF16_ENV}='yes': use 1 .* 0 .* unset"):
        forced(EPYC, "yes")


@pytest.mark.parametrize("device", ["cuda", "mps"])
def test_an_accelerator_trains_in_the_precision_asked_for(device, monkeypatch):
    monkeypatch.setenv(FORCE_BF16_ENV, "0")
    assert precision_on(device, "amp-fp16") == "amp-fp16" and precision_on("cpu", "amp-fp16") == "fp32"


# --- a measurement of the model on this CPU decides between bf16 and fp32 (Intel AMX ran the local ResNet-50 slower
# in bf16 than in fp32; an AMD EPYC with AVX-512 BF16 faster) ----------------------------------------------------


def test_a_measured_bf16_slower_than_fp32_keeps_fp32_and_says_what_was_measured():
    slow = replace(SPR, measured=Measured(fp32_s=0.19, bf16_s=0.23))
    c = choose("amp-fp16", False, slow)
    assert c.precision == "fp32"
    assert any("amp-fp16 -> fp32" in w and "230 ms/step in bf16, 190 in fp32" in w for w in c.why), c.why
    assert choose("bf16", False, slow).precision == "fp32"


def test_bf16_must_be_clearly_faster_to_be_chosen():
    assert choose("amp-fp16", False, replace(SPR, measured=Measured(fp32_s=0.20, bf16_s=0.12))).precision == "bf16"
    assert choose("amp-fp16", False, replace(SPR, measured=Measured(fp32_s=0.20, bf16_s=0.195))).precision == "fp32"


def test_without_a_measurement_bf16_instructions_mean_bf16():
    assert choose("amp-fp16", False, SPR).precision == "bf16"


def test_a_forced_cpu_kind_ignores_a_measurement():
    """EKSBENCH_CPU_BF16 makes the tests' two CPU kinds: a measurement of the real CPU must not undo it."""
    forced_on = replace(forced(SPR, "1"), measured=Measured(fp32_s=0.1, bf16_s=0.5))
    assert choose("amp-fp16", False, forced_on).precision == "bf16"
    assert choose("amp-fp16", False, replace(EPYC, measured=Measured(fp32_s=0.5, bf16_s=0.1))).precision == "fp32"
