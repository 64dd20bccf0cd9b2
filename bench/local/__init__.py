"""Acting on this machine: ``bench run --local`` (the run, its backend, its plan, launch table, etcd and
framework venvs) and the run's reserved folder."""
