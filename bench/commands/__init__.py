"""The command line's subcommands: each module parses its arguments (``register``) and prints; the work is
done by the rooms below (``local``, ``cloud``, ``results``, ``report``) and ``bench.automation``."""
