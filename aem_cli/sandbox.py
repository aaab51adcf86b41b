"""``aem sandbox``: build the offline sandbox images ahead, list them, reap orphans."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("sandbox", help="build, list and clean up sandboxes")
    commands = parser.add_subparsers(dest="sandbox_command", metavar="ACTION", required=True)

    build = commands.add_parser(
        "build",
        help="build the base image (and optional layers) now instead of on first use",
        description="Build aem-sandbox images offline: the debootstrap base (needs root and "
        "the Debian mirror), then optionally an environment layer from local wheels and an "
        "instance layer from a git bundle. Images already built are reused. Without a Docker "
        "engine the same tags are built as root file systems for the bubblewrap backend.",
    )
    build.add_argument(
        "--wheel",
        action="append",
        default=[],
        type=Path,
        metavar="FILE",
        help="a local .whl file for the environment layer (repeatable)",
    )
    build.add_argument(
        "--bundle", type=Path, metavar="FILE", help="a git bundle for an instance layer"
    )
    build.add_argument("--commit", help="the base commit to check out from --bundle")
    build.add_argument(
        "--setup",
        action="append",
        default=[],
        metavar="CMD",
        help="a setup command run in /testbed after the checkout (repeatable)",
    )
    build.add_argument(
        "--rootfs-only",
        action="store_true",
        help="build only the base root file system (for the bubblewrap backend, no Docker)",
    )
    build.set_defaults(func=run_build)

    gc = commands.add_parser("gc", help="remove sandbox containers whose owner process is gone")
    gc.add_argument(
        "--all", action="store_true", help="remove every sandbox container, live owners too"
    )
    gc.add_argument(
        "--layers",
        action="store_true",
        help="also remove the cached env/instance root file systems of the bubblewrap backend "
        "(they rebuild offline on next use; Docker's layer images: docker rmi $(docker images "
        "-q --filter label=aem.sandbox.kind=instance))",
    )
    gc.set_defaults(func=run_gc)

    ls = commands.add_parser("ls", help="list aem-sandbox images and sandbox containers")
    ls.set_defaults(func=run_ls)


def run_build(args: argparse.Namespace) -> int:
    from aem_envs.core.errors import DataError
    from sandboxes import images

    if (args.bundle is None) != (args.commit is None):
        raise DataError("--bundle and --commit go together: give both or neither")
    if args.rootfs_only:
        print(images.ensure_base_rootfs())
        return 0
    tag = images.ensure_base()  # a Docker image, or a root file system where no engine runs
    print(tag)
    if args.wheel:
        tag = images.ensure_env_image(args.wheel, base_image=tag)
        print(tag)
    if args.bundle is not None:
        print(
            images.ensure_instance_image(
                args.bundle, args.commit, env_image=tag, setup_commands=args.setup
            )
        )
    return 0


def run_gc(args: argparse.Namespace) -> int:
    from sandboxes.bwrap_sandbox import gc_scratch
    from sandboxes.docker_engine import docker_client, docker_unavailable_reason
    from sandboxes.reaper import gc, prune_layers

    for path in gc_scratch():
        print(f"removed bubblewrap scratch {path}")
    reason = docker_unavailable_reason()
    client = None if reason is not None else docker_client()
    if client is None:
        print(f"no containers to check: {reason}")
    else:
        removed = gc(client=client, everything=args.all)
        for item in removed:
            print(f"removed {item.container_id[:12]} ({item.image}): {item.reason}")
        print(f"{len(removed)} container(s) removed")
    if args.layers:
        layers = prune_layers()
        for path in layers:
            print(f"removed layer {path}")
        print(f"{len(layers)} layer root file system(s) removed")
    return 0


def run_ls(args: argparse.Namespace) -> int:
    from sandboxes.docker_engine import docker_client, docker_unavailable_reason
    from sandboxes.layers import KIND_LABEL, base_tag
    from sandboxes.owner import LABEL_PREFIX, Owner, is_alive
    from sandboxes.reaper import sandbox_containers
    from sandboxes.rootfs import base_rootfs_path

    rootfs = base_rootfs_path()
    state = "present" if rootfs.exists() else "not built"
    print(f"base root file system ({base_tag()}): {rootfs} [{state}]")
    reason = docker_unavailable_reason()
    if reason is not None:
        print(f"Docker: {reason}")
        return 0
    client = docker_client()
    print("images:")
    for image in client.images.list(filters={"label": KIND_LABEL}):
        size = image.attrs.get("Size", 0) / 1e6
        for tag in image.tags or ["<untagged>"]:
            print(f"  {tag}  {image.labels.get(KIND_LABEL)}  {size:.0f} MB")
    print("containers:")
    for container in sandbox_containers(client):
        owner = Owner.from_labels(container.labels)
        alive = None if owner is None else is_alive(owner)
        who = "?" if owner is None else f"pid {owner.pid} on {owner.host}"
        status = {True: "alive", False: "gone", None: "unknown"}[alive]
        image = container.labels.get(f"{LABEL_PREFIX}.image", "?")
        print(f"  {container.short_id}  {image}  {container.status}  owner {who} ({status})")
    return 0
