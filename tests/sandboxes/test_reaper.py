from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from sandboxes.owner import Owner, boot_id, current_owner, is_alive, process_start


def test_owner_labels_round_trip() -> None:
    owner = current_owner()
    assert Owner.from_labels(owner.labels()) == owner
    assert Owner.from_labels({"aem.sandbox": "1"}) is None


def test_the_current_process_is_alive() -> None:
    assert is_alive(current_owner()) is True


def test_a_finished_process_is_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    start = process_start(child.pid)
    child.wait()
    owner = Owner(pid=child.pid, start=start or "1", host=socket.gethostname(), boot=boot_id())
    assert is_alive(owner) is False


def test_a_reused_pid_or_an_earlier_boot_is_gone_and_another_host_is_unknown() -> None:
    me = current_owner()
    assert is_alive(Owner(me.pid, str(int(me.start) + 1), me.host, me.boot)) is False
    assert is_alive(Owner(me.pid, me.start, me.host, "another-boot")) is False
    assert is_alive(Owner(me.pid, me.start, me.host + "-elsewhere", me.boot)) is None


def test_process_start_reads_names_with_spaces_and_parentheses(tmp_path) -> None:
    program = tmp_path / "odd) name ("
    program.symlink_to(sys.executable)
    child = subprocess.Popen([str(program), "-c", "import time; time.sleep(5)"])
    try:
        assert process_start(child.pid) is not None
        assert process_start(child.pid).isdigit()
    finally:
        child.kill()
        child.wait()


@pytest.mark.docker
def test_gc_keeps_live_owners_and_removes_unlabelled_or_dead_ones(instance_image: str) -> None:

    from sandboxes import gc
    from sandboxes.docker_engine import client_session
    from sandboxes.docker_sandbox import DockerSandbox
    from sandboxes.owner import LABEL_MARK

    with client_session() as client:
        dead = Owner(pid=os.getpid(), start="0", host=socket.gethostname(), boot=boot_id())
        orphan = client.containers.create(instance_image, command=["true"], labels=dead.labels())
        unlabelled = client.containers.create(
            instance_image, command=["true"], labels={LABEL_MARK: "1"}
        )
        with DockerSandbox(instance_image) as live:
            reaped = {item.container_id for item in gc(client=client)}
            assert {orphan.id, unlabelled.id} <= reaped
            assert live.container_id not in reaped
            assert client.containers.get(live.container_id).status == "running"
