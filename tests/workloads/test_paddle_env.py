"""The paddle env contract with Paddle's gloo store, on the cluster and for the local run (pure)."""

from __future__ import annotations

from dataclasses import replace

from core.catalog.pins import PADDLE_IMAGE
from core.config.model import Experiment
from workloads.framework_support import check_experiment, entry_file, missing_entry_points
from workloads.launch.by_framework import launch_for
from workloads.launch.paddle import PADDLE_GLOO_PORT, PADDLE_PORT, paddle_env, paddle_ps_env

E = replace(Experiment(name="pd"), framework="paddle", min_nodes=2, max_nodes=2, pservers=2, image=PADDLE_IMAGE)


def test_every_paddle_pod_finds_the_gloo_store_on_pserver_0():
    for role, index in (("PSERVER", 0), ("PSERVER", 1), ("TRAINER", 0), ("TRAINER", 1)):
        env = paddle_env(E, job="pd", service="svc", role=role, index=index)
        assert env["PADDLE_GLOO_HTTP_ENDPOINT"] == f"pd-ps-0.svc:{PADDLE_GLOO_PORT}"
        assert (env["PADDLE_WITH_GLOO"], env["PADDLE_GLOO_RENDEZVOUS"]) == ("1", "3")
        assert env["PADDLE_PORT"] == str(PADDLE_PORT)
        # a trainer's POD_IP is the downward API's (job_manifests), a pserver's its DNS name
        assert ("POD_IP" in env) is (role == "PSERVER")


def test_the_local_env_puts_each_process_on_its_own_loopback_port():
    ps, tr = ["127.0.0.1:5001", "127.0.0.1:5002"], ["127.0.0.1:5011", "127.0.0.1:5012"]
    server = paddle_ps_env(pservers=ps, trainers=tr, role="PSERVER", index=1, task="t", gloo_port=5020)
    assert (server["POD_IP"], server["PADDLE_PORT"], server["SERVER_ENDPOINT"]) == ("127.0.0.1", "5002", ps[1])
    trainer = paddle_ps_env(pservers=ps, trainers=tr, role="TRAINER", index=1, task="t", gloo_port=5020)
    assert (trainer["POD_IP"], trainer["PADDLE_PORT"], trainer["PADDLE_TRAINER_ID"]) == ("127.0.0.1", "5012", "1")
    assert trainer["PADDLE_GLOO_HTTP_ENDPOINT"] == "127.0.0.1:5020" and trainer["PADDLE_TRAINERS_NUM"] == "2"


def test_a_paddle_experiment_with_its_default_image_is_accepted():
    assert check_experiment(E) == []
    assert missing_entry_points((E,), {entry_file("paddle"): "..."}) == []


def test_both_paddle_jobs_tell_the_launcher_their_shape_and_the_trainers_arguments():
    """Nothing is read back from a command line: each Job's pods carry a Launched (one process per pod)."""
    from core.contract.train_args import parse_train_args
    from tests.workloads.test_launch import ENV

    e = replace(E, pservers=3, max_nodes=2, min_nodes=2, args=("--batch-size=5",))
    for role, pods in (("PSERVER", 3), ("TRAINER", 2)):
        launch = launch_for(e, ENV, job="pd", service="svc", gpus=1, role=role)
        assert (launch.launched.nodes, launch.launched.procs_per_node) == (pods, 1)
        i = launch.argv.index("-m")
        assert launch.argv[i + 1] == "workloads.train.paddle"
        assert launch.launched.train == parse_train_args(launch.argv[i + 2:]) and launch.launched.train.batch_size == 5
