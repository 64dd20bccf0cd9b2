"""``eksbench run <stack>...``: run a stack's experiments, collect the results, always tear down.

``--local`` runs them on this machine, scaled down (``bench.local.run``); without it the
whole AWS lifecycle runs (``bench.cloud.run``: preflight, ``pulumi up``, watch, teardown,
collect). Both go through one orchestrator, ``bench.lifecycle.run_lifecycle``. Results land
in ``./results/<stack>/<run-id>/<experiment>/``, a results table is printed at the end.
Exit codes: 0 all experiments succeeded; 1 an experiment, the environment or the teardown
failed; 2 bad input or a preflight refusal; 130/143 interrupted (SIGINT/SIGTERM), after
teardown. Several stacks run as one child process each (``bench.commands.multi``).
torch is never imported here (the children import it).
"""

from __future__ import annotations

import argparse
import math

from bench.commands.settings import add_set_option, overrides_of
from bench.errors import USAGE_ERROR, fail
from bench.project import add_project_options, results_root_problem
from core.config.overrides import SetError

DESCRIPTION = """\
Run a stack's experiments, collect their results, and always tear down what the run created.

With --local the experiments run on this machine, scaled down by the stack's local: section
(torchrun with etcd or c10d rendezvous, gloo on CPUs). Without it the whole AWS run happens:
checks first (credentials, quotas, the estimated cost), then pulumi up, the training, the results
copied home and pulumi destroy. Before it creates anything it shows what it creates and what that
costs an hour, and asks Proceed? [y/N]; --yes answers yes (without a terminal, --yes is needed).
Results land in <results-root>/<stack>/<run-id>/<experiment>/ and a table of them is printed at
the end. Several stacks run side by side, each line prefixed with its stack's name (on AWS with --yes).

exit codes:
  0    every experiment succeeded
  1    an experiment, the environment or the teardown failed
  2    bad input, a check before the run refused it, or the question was not answered yes (nothing
       was created)
  130  interrupted (Ctrl-C), 143 terminated (SIGTERM); both after the teardown"""

EXAMPLES = """\
examples:
  eksbench run dev --local                        the dev stack's experiments on this machine
  eksbench run dev --local --dry-run              the plan and the node commands, nothing run
  eksbench run dev --local --experiment cifar10-elastic --run-id try-2
  eksbench run dev --local --set 'experiments[0].nodes=1' --set local.steps=50
  eksbench run dev --max-cost 150 --deadline 120  on AWS, within $150 and two hours (asks first)
  eksbench run dev --yes --max-cost 150           on AWS without the question (scripts, CI)
  eksbench run dev fabric --local                 two stacks side by side"""

# Flags that only one kind of run reads: given to the other, they would be ignored silently.
AWS_ONLY = {"keep": "it keeps the cluster with its GPU groups at zero",
            "yes": "it answers the question asked before resources are created",
            "max_cost": "it caps the AWS run's estimated and spent cost",
            "poll": "it sets how often the cluster's results are checked"}
LOCAL_ONLY = {"dry_run": "for AWS, eksbench plan STACK shows what pulumi up would build and what it costs"}


def positive(unit: str, example: str):
    """An argparse ``type=``: a finite number above 0 of ``unit``, else a message with the rule and an example."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"{text!r}: must be a positive number of {unit}, e.g. {example}")
        return value
    return parse


def register(subparsers) -> None:
    p = subparsers.add_parser("run", help="run a stack's experiments: provision, run, collect, tear down "
                                          "(--local: on this machine)",
                              description=DESCRIPTION, epilog=EXAMPLES,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("stacks", nargs="+", metavar="stack",
                   help="stack name(s), e.g. dev (reads Pulumi.<stack>.yaml); several run side by side")
    p.add_argument("--local", action="store_true", help="run on this machine, scaled down by the stack's local:")
    p.add_argument("--experiment", metavar="NAME", help="run only this experiment (on AWS: only its Jobs are created)")
    add_set_option(p)
    p.add_argument("--run-id", metavar="ID", help="results folder name (--local; default: UTC timestamp; "
                                                    "on AWS the stack's eksbench:run_id)")
    p.add_argument("--resume", action="store_true",
                   help="reuse a run id whose results already hold a summary.json (otherwise refused)")
    p.add_argument("--progress-every", type=positive("seconds", "--progress-every 10"), default=3.0,
                   metavar="S", help="seconds between progress lines (default: 3)")
    p.add_argument("--deadline", type=positive("minutes", "--deadline 90"), metavar="MIN",
                   help="stop and tear down after this many minutes (AWS default: estimated provisioning x2 "
                        "+ the experiments' timeouts + 10)")
    p.add_argument("--max-cost", type=positive("US dollars", "--max-cost 150"), metavar="USD",
                   help="AWS only: refuse a run estimated above this, and stop + tear down when it is spent")
    p.add_argument("--keep", action="store_true",
                   help="AWS only: do not destroy; scale the GPU node groups to zero and print how to destroy later")
    p.add_argument("-y", "--yes", action="store_true",
                   help="AWS only: create the resources without asking (needed where stdin is not a terminal)")
    p.add_argument("--poll", type=positive("seconds", "--poll 15"), metavar="S",
                   help="AWS only: seconds between result checks (default: 15)")
    add_project_options(p)
    p.add_argument("--dry-run", action="store_true",
                   help="--local only: print the plan and the node commands, run nothing")
    p.set_defaults(func=cmd_run)


def flag_problems(args) -> list[str]:
    """One line per flag that the kind of run asked for (--local or AWS) would ignore."""
    wrong, other = (AWS_ONLY, "drop it or run without --local") if args.local else (
        LOCAL_ONLY, "drop it or add --local")
    kind = "AWS runs" if args.local else "--local runs"
    return [f"--{name.replace('_', '-')}: only for {kind} ({why}); {other}"
            for name, why in wrong.items() if getattr(args, name) not in (None, False)]


def cmd_run(args) -> int:
    problems = flag_problems(args)
    if not problems and (unusable := results_root_problem(args.results_root)):
        problems = [unusable]
    try:
        args.overrides = overrides_of(args, args.experiment)
    except SetError as e:
        problems.append(str(e))
    for problem in problems:
        fail(problem)
    if problems:
        return USAGE_ERROR
    if len(args.stacks) > 1:
        from bench.commands.multi import run_many

        return run_many(args)
    args.stack = args.stacks[0]
    if not args.local:
        from bench.cloud.run import run_cloud

        return run_cloud(args)
    from bench.local.run import run_local

    return run_local(args)
