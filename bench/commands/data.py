"""``eksbench data``: list, prepare and verify the datasets the experiments train on.

  data list                         the catalog: name, layout, size, source
  data prepare NAME --to DEST       fetch or generate, convert, upload (resumable), manifest last
  data verify DEST                  check every object against the manifest

DEST is ``s3://bucket/prefix/`` (the stack stages from ``<datasets_uri>/<name>/``) or a
local directory. Mistakes print one line and exit 2; ``verify`` exits 1 when objects
are bad or missing. The datasets package and boto3 are imported inside the commands.
"""

from __future__ import annotations

import argparse
import getpass
import socket
import sys
from datetime import datetime, timezone
from pathlib import Path

from bench.errors import fail
from core.config.fields import shorten


def register(subparsers) -> None:
    data = subparsers.add_parser(
        "data", help="list, prepare and verify the datasets the experiments train on",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="The datasets the experiments train on. DEST is s3://bucket/prefix/ (a stack stages from\n"
                    "<datasets_uri>/<name>/) or a local folder. `prepare` fetches or generates, converts and uploads\n"
                    "(resumable), writing the manifest last; `verify` checks every object against it (exit 1 when\n"
                    "any is bad or missing).",
        epilog="examples:\n  eksbench data list\n"
               "  eksbench data prepare synthetic-imagefolder --to s3://my-data/datasets/synthetic-imagefolder/\n"
               "  eksbench data verify s3://my-data/datasets/synthetic-imagefolder/")
    sub = data.add_subparsers(dest="data_command", required=True, metavar="ACTION")

    ls = sub.add_parser("list", help="print the dataset catalog",
                        description="Print the datasets the experiments can train on: name, layout, size, source.")
    ls.set_defaults(func=cmd_list)

    p = sub.add_parser("prepare", help="prepare a dataset and upload it with its manifest",
                       description="Fetch (or generate) a catalog dataset, convert it, upload it to DEST (resumable: "
                                   "what is already there is kept) and write its manifest last.")
    p.add_argument("name", help="a catalog dataset (see `data list`)")
    p.add_argument("--to", required=True, metavar="DEST", help="s3://bucket/prefix/ or a local directory")
    p.add_argument("--from", dest="source", metavar="PATH",
                   help="the source: a downloaded file, a directory holding the source files, or a URL")
    p.add_argument("--work", metavar="DIR", help="downloads and extraction (default ~/.cache/eksbench/datasets/NAME)")
    p.add_argument("--images", type=int, default=10_000, help="synthetic-imagefolder: train images")
    p.add_argument("--classes", type=int, default=100, help="synthetic-imagefolder: classes")
    p.add_argument("--resolution", type=int, default=256, help="synthetic-imagefolder: image side in pixels")
    p.add_argument("--seed", type=int, default=0, help="synthetic-imagefolder: random seed")
    p.add_argument("--max-tokens", type=int, metavar="N",
                   help="token datasets: stop after the document that reaches N tokens (default: the whole corpus)")
    p.add_argument("--shard-tokens", type=int, metavar="N", help="token datasets: tokens per shard file "
                   "(default: the catalog's, 100,000,000 for fineweb-edu-10bt-sample)")
    p.add_argument("--workers", type=int, default=16, help="parallel uploads")
    p.add_argument("--delete-extra", action="store_true",
                   help="delete files at DEST that the new manifest does not list (default: warn)")
    p.add_argument("--dry-run", action="store_true", help="say what would be done, do nothing")
    p.set_defaults(func=cmd_prepare)

    v = sub.add_parser("verify", help="check every object against the manifest (size and sha256)",
                       description="Check every object at DEST against its manifest (size and sha256); exit 1 when "
                                   "any is bad or missing.")
    v.add_argument("dest", metavar="DEST", help="s3://bucket/prefix/ or a local directory")
    v.add_argument("--workers", type=int, default=16, help="parallel reads (default: 16)")
    v.add_argument("--strict", action="store_true",
                   help="fail on any file the manifest does not list (default: report them; fail only on "
                        "extra class folders of an imagefolder dataset)")
    v.set_defaults(func=cmd_verify)


def cmd_list(args) -> int:
    from datasets.catalog import CATALOG, human_bytes

    width = max(len(name) for name in CATALOG)
    print(f"{'NAME':<{width}} {'LAYOUT':<14} {'SIZE':>9}  SOURCE")
    for ds in CATALOG.values():
        size = "-" if not ds.needs_staging else ("varies" if ds.generated else human_bytes(ds.approx_bytes))
        print(f"{ds.name:<{width}} {ds.layout:<14} {size:>9}  {ds.source_text()}")
    return 0


def cmd_prepare(args) -> int:
    from datasets.catalog import UnknownDataset, dataset
    from datasets.errors import DataError
    from datasets.prepare import prepare
    from datasets.store import open_store
    from datasets.synthetic import SyntheticSpec, check_spec
    from datasets.token_shards import TokenSpec

    try:
        ds = dataset(args.name)
        if not ds.needs_staging:
            print(f"{ds.name}: nothing to prepare; the training script generates it in memory")
            return 0
        if not ds.tokens and (args.max_tokens is not None or args.shard_tokens is not None):
            return fail(f"--max-tokens/--shard-tokens: {ds.name} is not a token dataset ({ds.layout}); they apply "
                        "to text-bytes and fineweb-edu-10bt-sample")
        store = open_store(args.to, workers=args.workers)
        work = Path(args.work) if args.work else Path.home() / ".cache" / "eksbench" / "datasets" / ds.name
        spec = SyntheticSpec(images=args.images, classes=args.classes, resolution=args.resolution,
                             seed=args.seed) if ds.generated else None
        if args.dry_run:
            if spec:
                check_spec(spec)
                what = (f"generate {spec.images} train + {spec.val_count} val JPEGs ({spec.classes} classes, "
                        f"{spec.resolution} px, seed {spec.seed})")
            elif ds.tokens:
                what = (f"tokenize {args.source or ds.source_text()} with the {ds.tokens.tokenizer} tokenizer "
                        f"into train/val shards")
            else:
                what = f"take {args.source or ds.source_text()}"
            print(f"would {what}, lay it out as {ds.layout} in {work}, upload what {store} lacks, "
                  "then write manifest.json")
            return 0
        tokens = TokenSpec(max_tokens=args.max_tokens, shard_tokens=args.shard_tokens) if ds.tokens else None
        result = prepare(ds, store, source=args.source, work=work, spec=spec, delete_extra=args.delete_extra,
                         tokens=tokens,
                         created_by=f"eksbench data prepare ({getpass.getuser()}@{socket.gethostname()})",
                         created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                         log=lambda m: print(m, file=sys.stderr))
    except (DataError, UnknownDataset) as e:
        return fail(str(e))
    m = result.manifest
    print(f"{ds.name}: {m['file_count']} files, {m['total_bytes']} bytes at {store} "
          f"({result.uploaded} uploaded, {result.skipped} already there)")
    return 0


SHOWN_EXTRAS = 20  # extra files named one per line; the rest are counted


def cmd_verify(args) -> int:
    from datasets.errors import DataError
    from datasets.prepare import verify
    from datasets.store import open_store

    try:
        store = open_store(args.dest, workers=args.workers)
        result = verify(store)
    except DataError as e:
        return fail(str(e))
    manifest, problems = result.manifest, result.problems
    for line in problems:
        print(f"BAD {line}")
    for folder in result.extra_classes:
        print(f"EXTRA CLASS {shorten(folder)}/ (not in the manifest: ImageFolder would train on it as one more class)")
    for path in result.extras[:SHOWN_EXTRAS]:
        print(f"EXTRA {shorten(path)}")
    if len(result.extras) > SHOWN_EXTRAS:
        print(f"EXTRA ... and {len(result.extras) - SHOWN_EXTRAS} more")
    n = len(manifest["files"])
    failed = []
    if problems:
        failed.append(f"{len(problems)} of {n} files bad or missing")
    if result.extra_classes:
        failed.append(f"{len(result.extra_classes)} class folders the manifest does not list")
    if result.extras and args.strict:
        failed.append(f"{len(result.extras)} files the manifest does not list (--strict)")
    if failed:
        print(f"{store}: {'; '.join(failed)}", file=sys.stderr)
        return 1
    extra = (f"; {len(result.extras)} files the manifest does not list (remove them, or `prepare --delete-extra`)"
             if result.extras else "")
    print(f"{store}: all {n} files match the manifest ({manifest['total_bytes']} bytes){extra}")
    return 0
