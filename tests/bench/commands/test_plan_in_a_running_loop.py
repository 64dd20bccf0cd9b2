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
