"""The offline plan works where an asyncio loop already runs in the thread (a Jupyter kernel).

Before, the mock engine's run_until_complete failed there with "Cannot run the event loop
while another loop is running".
"""

import asyncio

from bench import automation


def test_plan_inside_a_running_event_loop():
    async def in_a_kernel():
        return automation.plan("dev")

    plan = asyncio.run(in_a_kernel())
    assert plan.estimate["hourly_cost_usd"] > 0 and any(r["type"] == "eks:index:Cluster" for r in plan.resources)



# A notebook's kernel: a plan that fails, then a plan inside the kernel's running loop, in one process.
KERNEL = """
import asyncio, sys
from pathlib import Path
from bench import automation
from core.config.fields import ConfigError
try:
    automation.plan("x", Path(sys.argv[1]))
except ConfigError:
    pass
async def cell():
    return automation.plan("dev")
print(asyncio.run(cell()).estimate["hourly_cost_usd"] > 0)
"""


def test_plan_inside_a_running_event_loop_after_a_plan_that_failed(tmp_path):
    """Before: the second plan waited for ever on what the failed plan left pending (bound to its closed loop)."""
    import subprocess
    import sys

    from program.stack_files import ROOT

    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "Pulumi.x.yaml").write_text("config:\n  aws:region: us-west-2\n  eksbench:storage: {kind: nfs}\n")
    try:
        done = subprocess.run([sys.executable, "-c", KERNEL, str(tmp_path)], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise AssertionError("the plan after a failed one did not finish in 120 s") from None
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr[-2000:]
