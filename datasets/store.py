"""Where a prepared dataset is written: an S3 prefix or a local directory.

Both stores answer the same few questions (which files are already there with the
right bytes, what manifest is there) and do the same few things (copy files, write
the manifest atomically, check contents against a manifest), so ``datasets.prepare``
does not care which it has.

S3: files go through boto3's transfer manager (multipart and parallel per
``TransferConfig``), each object carrying its sha256 in user metadata
(``x-amz-meta-sha256``). S3's own ChecksumSHA256 is not used for skipping: for
multipart uploads it is a checksum of part checksums, not of the file. A single
PutObject is atomic (S3 never shows a partly written object), which is what makes
the manifest write atomic. boto3 is imported lazily.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from core.catalog.aws import credentials_problem
from core.contract.s3_uri import parse_s3_uri
from datasets.errors import DataError
from datasets.file_checks import (
    CHUNK,
    check_file,
    check_tree,
    path_problem,
    read_regular_file,
)
from datasets.file_manifest import MANIFEST_NAME, FileEntry, parse_manifest

META_KEY = "sha256"
MiB = 1024 * 1024


def open_store(target: str, *, client=None, workers: int = 16, multipart_mib: int = 64):
    """A store for ``target``: ``s3://bucket/prefix/`` or a local directory path."""
    if target.startswith("s3://"):
        try:
            bucket, prefix = parse_s3_uri(target)
        except ValueError as e:
            raise DataError(str(e)) from None
        return S3Store(bucket, prefix, client=client, workers=workers, multipart_mib=multipart_mib)
    if "://" in target:
        raise DataError(f"{target!r}: only s3:// URIs and local directories are supported, e.g. "
                        "s3://my-bucket/datasets/cifar10/ or ./data/cifar10")
    return LocalStore(Path(target))


def s3_client():
    import boto3

    return boto3.client("s3")


class LocalStore:
    def __init__(self, root: Path):
        self.root = root

    def __str__(self) -> str:
        return str(self.root)

    def check_access(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise DataError(f"cannot create {self.root}: {e.strerror}; choose a writable directory") from None
        if not os.access(self.root, os.W_OK):
            raise DataError(f"{self.root} is not writable; choose a writable directory")

    def present(self, files: list[FileEntry], known: dict[str, str] | None = None) -> set[str]:
        entry = lambda f: {"path": f.path, "size": f.size, "sha256": f.sha256}  # noqa: E731
        with ThreadPoolExecutor(8) as pool:
            ok = pool.map(lambda f: not check_file(str(self.root), entry(f)), files)
            return {f.path for f, good in zip(files, ok) if good}

    def read_manifest(self) -> dict | None:
        """The manifest at the root, None when there is none; DataError when it is unreadable or malformed."""
        path = self.root / MANIFEST_NAME
        try:
            raw = read_regular_file(str(path))
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as e:
            raise DataError(f"cannot read {path}: {e.strerror or e}; it must be a regular file") from None
        try:
            return parse_manifest(raw, str(path))
        except ValueError as e:
            raise DataError(str(e)) from None

    def delete_manifest(self) -> None:
        (self.root / MANIFEST_NAME).unlink(missing_ok=True)

    def put_files(self, files: list[FileEntry], on_file: Callable[[FileEntry], None],
                  on_bytes: Callable[[int], None] = lambda n: None) -> None:
        for f in files:
            dest = self.root / f.path
            if f.source and f.source.resolve() != dest.resolve():
                dest.parent.mkdir(parents=True, exist_ok=True)
                tmp = dest.with_name(dest.name + ".part")
                shutil.copyfile(f.source, tmp)
                os.replace(tmp, dest)
            on_bytes(f.size)
            on_file(f)

    def listing(self) -> tuple[list[str], list[str]]:
        """(every entry under the root that is not a folder, every folder), relative, "/"-separated.

        Symbolic links are listed as entries, never followed; a link to a folder is also listed
        as a folder (a reader following it would see one).
        """
        entries, folders = [], []
        for folder, dirs, files in os.walk(self.root):  # followlinks=False
            rel = Path(folder).relative_to(self.root).as_posix()
            prefix = "" if rel == "." else rel + "/"
            folders += [prefix + d for d in dirs]
            entries += [prefix + d for d in dirs if os.path.islink(os.path.join(folder, d))]
            entries += [prefix + f for f in files]
        return sorted(entries), sorted(folders)

    def extras(self, files: list[FileEntry]) -> list[str]:
        """Files under the root that the new manifest does not list."""
        keep = {f.path for f in files} | {MANIFEST_NAME}
        return [rel for rel in self.listing()[0] if rel not in keep]

    def delete(self, paths: list[str]) -> None:
        for rel in paths:
            (self.root / rel).unlink(missing_ok=True)

    def write_manifest(self, data: bytes) -> None:
        tmp = self.root / (MANIFEST_NAME + ".part")
        tmp.write_bytes(data)
        os.replace(tmp, self.root / MANIFEST_NAME)  # atomic on POSIX: readers see old or new, never half

    def verify(self, manifest: dict) -> list[str]:
        return check_tree(str(self.root), manifest)


class S3Store:
    def __init__(self, bucket: str, prefix: str, *, client=None, workers: int = 16, multipart_mib: int = 64):
        self.bucket, self.prefix = bucket, prefix
        self._client = client
        self.workers = workers
        self.multipart_mib = multipart_mib

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    @property
    def client(self):
        if self._client is None:
            self._client = s3_client()
        return self._client

    def _error(self, e: Exception, action: str) -> DataError:
        """One line for an AWS failure: which bucket, what went wrong, what to do."""
        from botocore.exceptions import ClientError

        where = f"s3://{self.bucket}/{self.prefix}"
        if line := credentials_problem(e, f"{action} {where}"):  # none, a profile not there, expired
            return DataError(line)
        if isinstance(e, ClientError):
            code = e.response.get("Error", {}).get("Code", "")
            if code in ("NoSuchBucket", "404"):
                return DataError(f"bucket {self.bucket!r} does not exist (while trying to {action} {where}); "
                                 "create it first or choose another bucket")
            if code in ("AccessDenied", "403", "AllAccessDisabled", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
                return DataError(f"no permission to {action} {where} ({code}); your credentials need "
                                 "s3:ListBucket, s3:GetObject and s3:PutObject there")
            return DataError(f"S3 refused to {action} {where}: {code}: {e.response['Error'].get('Message', '')}")
        return DataError(f"cannot {action} {where}: {e}")

    def _call(self, action: str, fn, **kwargs):
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn(**kwargs)
        except (ClientError, BotoCoreError) as e:
            raise self._error(e, action) from None

    def check_access(self) -> None:
        self._call("list", self.client.list_objects_v2, Bucket=self.bucket, Prefix=self.prefix, MaxKeys=1)

    def sizes(self) -> dict[str, int]:
        """Relative path -> size of every object under the prefix."""
        out: dict[str, int] = {}
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix)
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            for page in pages:
                for obj in page.get("Contents", []):
                    out[obj["Key"][len(self.prefix):]] = obj["Size"]
        except (ClientError, BotoCoreError) as e:
            raise self._error(e, "list") from None
        return out

    def present(self, files: list[FileEntry], known: dict[str, str] | None = None) -> set[str]:
        """Files already uploaded with the same size and sha256.

        ``known`` (path -> sha256) is the manifest already at the prefix: it was written after
        those objects were uploaded, so a listed object of the right size needs no HeadObject.
        The others of the right size are checked by their ``sha256`` metadata.
        """
        sizes = self.sizes()
        known = known or {}
        trusted = {f.path for f in files if sizes.get(f.path) == f.size and known.get(f.path) == f.sha256}
        candidates = [f for f in files if sizes.get(f.path) == f.size and f.path not in trusted]

        def same(f: FileEntry) -> bool:
            head = self._call("read", self.client.head_object, Bucket=self.bucket, Key=self.prefix + f.path)
            return head.get("Metadata", {}).get(META_KEY) == f.sha256

        with ThreadPoolExecutor(self.workers) as pool:
            return trusted | {f.path for f, ok in zip(candidates, pool.map(same, candidates)) if ok}

    def read_manifest(self) -> dict | None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            raw = self.client.get_object(Bucket=self.bucket, Key=self.prefix + MANIFEST_NAME)["Body"].read()
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise self._error(e, "read") from None
        except BotoCoreError as e:  # an unreachable endpoint, a read timeout: one line naming where
            raise self._error(e, "read") from None
        try:
            return parse_manifest(raw, f"s3://{self.bucket}/{self.prefix}{MANIFEST_NAME}")
        except ValueError as e:
            raise DataError(str(e)) from None

    def key(self, path: str) -> str:
        """The object key of a manifest path; DataError when the path could name anything outside the prefix."""
        problem = path_problem(path)
        if problem:
            raise DataError(f"{self}: refusing {problem}")
        return self.prefix + path

    def delete_manifest(self) -> None:
        self._call("delete from", self.client.delete_object, Bucket=self.bucket, Key=self.prefix + MANIFEST_NAME)

    def put_files(self, files: list[FileEntry], on_file: Callable[[FileEntry], None],
                  on_bytes: Callable[[int], None] = lambda n: None) -> None:
        from boto3.s3.transfer import TransferConfig, create_transfer_manager
        from s3transfer.subscribers import BaseSubscriber

        class Report(BaseSubscriber):
            def __init__(self, entry: FileEntry):
                self.entry = entry

            def on_progress(self, future, bytes_transferred, **kwargs):
                on_bytes(bytes_transferred)

            def on_done(self, future, **kwargs):
                try:
                    future.result()  # done already: returns or raises at once
                except Exception:
                    return
                on_file(self.entry)

        config = TransferConfig(multipart_threshold=self.multipart_mib * MiB,
                                multipart_chunksize=max(5, self.multipart_mib // 4) * MiB,  # S3 minimum part: 5 MiB
                                max_concurrency=self.workers, use_threads=True)
        manager = create_transfer_manager(self.client, config)
        failed: Exception | None = None
        try:
            futures = [manager.upload(str(f.source), self.bucket, self.prefix + f.path,
                                      extra_args={"Metadata": {META_KEY: f.sha256}}, subscribers=[Report(f)])
                       for f in files]
            for fut in futures:
                try:
                    fut.result()
                except Exception as e:  # keep waiting: finished uploads count on the next run
                    failed = failed or e
        finally:
            manager.shutdown(cancel=failed is not None)
        if failed is not None:
            from botocore.exceptions import BotoCoreError, ClientError

            if isinstance(failed, (ClientError, BotoCoreError)):
                raise self._error(failed, "upload to")
            raise failed

    def listing(self) -> tuple[list[str], list[str]]:
        """(every object under the prefix, relative; the folders their keys imply, as an FSx import shows them)."""
        keys = sorted(self.sizes())
        folders = {"/".join(k.split("/")[:n]) for k in keys for n in range(1, k.count("/") + 1)}
        return keys, sorted(folders - {""})

    def extras(self, files: list[FileEntry]) -> list[str]:
        """Objects under the prefix that the new manifest does not list (an FSx import would show them)."""
        keep = {f.path for f in files} | {MANIFEST_NAME}
        return [k for k in self.listing()[0] if k not in keep]

    def delete(self, paths: list[str]) -> None:
        for i in range(0, len(paths), 1000):  # DeleteObjects takes at most 1000 keys
            batch = [{"Key": self.prefix + p} for p in paths[i:i + 1000]]
            self._call("delete from", self.client.delete_objects, Bucket=self.bucket,
                       Delete={"Objects": batch, "Quiet": True})

    def write_manifest(self, data: bytes) -> None:
        self._call("upload to", self.client.put_object, Bucket=self.bucket, Key=self.prefix + MANIFEST_NAME,
                   Body=data, ContentType="application/json",
                   Metadata={META_KEY: hashlib.sha256(data).hexdigest()})

    def verify(self, manifest: dict) -> list[str]:
        """Every object that is missing or differs from the manifest (contents streamed and hashed)."""
        sizes = self.sizes()

        def check(e: dict) -> str:
            key = self.key(e["path"])  # refuses before anything is looked up
            if e["path"] not in sizes:
                return f"{e['path']}: missing"
            if sizes[e["path"]] != e["size"]:
                return f"{e['path']}: size {sizes[e['path']]}, manifest says {e['size']}"
            body = self._call("read", self.client.get_object, Bucket=self.bucket, Key=key)["Body"]
            h = hashlib.sha256()
            for block in iter(lambda: body.read(CHUNK), b""):
                h.update(block)
            if h.hexdigest() != e["sha256"]:
                return f"{e['path']}: sha256 {h.hexdigest()[:16]}..., manifest says {e['sha256'][:16]}..."
            return ""

        with ThreadPoolExecutor(self.workers) as pool:
            return [r for r in pool.map(check, manifest["files"]) if r]
