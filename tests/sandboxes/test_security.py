"""The security battery: each attack is contained, and the sandbox still works afterwards.

Every test runs on both backends (Docker: ``@pytest.mark.docker``, required in CI; bubblewrap)
with the small ``TEST_LIMITS`` of conftest. Disk filling: overlay on ext4 has no quota, so the
bound is ``RLIMIT_FSIZE`` per file (64 MiB here) on both backends, plus a size-limited tmpfs
``/tmp`` under Docker; a command writing many files is bounded only by its time limit.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid

import pytest

from sandboxes import Sandbox

from .conftest import TEST_LIMITS


def assert_usable(box: Sandbox) -> None:
    assert tuple(box.exec("echo alive && python3 -c 'print(6*7)'")) == (0, "alive\n42\n")


def test_network_egress_is_refused(box: Sandbox) -> None:
    probe = "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=3)\""
    code, output = box.exec(probe, timeout=15)
    assert code != 0 and "unreachable" in output.lower()
    interfaces = box.exec("awk -F: 'NR > 2 {print $1}' /proc/net/dev").output
    assert interfaces.split() == ["lo"]
    assert_usable(box)


def test_fork_bomb_is_bounded_and_cleaned_up(box: Sandbox) -> None:
    result = box.exec(":(){ :|:& };:; sleep 30", timeout=4)
    assert result.timed_out
    assert "Resource temporarily unavailable" in result.output  # the process limit held
    count = int(box.exec("ps -e --no-headers | wc -l").output)
    assert count < 10  # nothing of the bomb survives its command
    assert_usable(box)


def test_process_count_is_limited(box: Sandbox) -> None:
    script = textwrap.dedent(
        """
        import threading, time
        n = 0
        try:
            while n < 10_000:
                threading.Thread(target=time.sleep, args=(5,), daemon=True).start()
                n += 1
        except RuntimeError:
            pass
        print(n)
        """
    )
    box.write_file("/tmp/threads.py", script)
    code, output = box.exec("python3 /tmp/threads.py", timeout=20)
    assert code == 0, output
    assert int(output.split()[-1]) < TEST_LIMITS.pids
    assert_usable(box)


def test_memory_bomb_is_killed(box: Sandbox) -> None:
    code, output = box.exec("python3 -c \"x = bytearray(1 << 30); print('survived')\"", timeout=30)
    assert code != 0 and "survived" not in output
    assert_usable(box)


def test_infinite_loop_is_killed_at_the_time_limit(box: Sandbox) -> None:
    result = box.exec("while :; do :; done", timeout=2)
    assert result.timed_out and result.exit_code == 137
    assert_usable(box)


def test_setsid_escapes_do_not_survive_their_command(box: Sandbox) -> None:
    marker = uuid.uuid4().hex[:8]
    # Returns at once, leaving a detached process that holds the output pipe open.
    result = box.exec(f"setsid bash -c 'exec -a esc{marker} sleep 300' & echo started", timeout=5)
    assert tuple(result) == (0, "started\n")
    # Times out while a detached process is running.
    result = box.exec(f"setsid bash -c 'exec -a esc{marker} sleep 300' & sleep 60", timeout=2)
    assert result.timed_out
    assert marker not in box.exec("ps -eo args").output
    assert_usable(box)


def test_fifty_megabytes_of_output_are_clipped(box: Sandbox) -> None:
    result = box.exec("head -c 50000000 /dev/zero | tr '\\0' a; echo; echo END", timeout=60)
    assert result.exit_code == 0
    assert result.clipped_bytes > 49_000_000
    assert result.output.endswith("END\n")
    assert len(result.output) < TEST_LIMITS.output_chars + 300
    assert_usable(box)


def test_binary_garbage_output_is_decoded_safely(box: Sandbox) -> None:
    code, output = box.exec("head -c 200000 /dev/urandom", timeout=20)
    assert code == 0
    assert not any(ord(ch) < 32 and ch not in "\n\t" for ch in output)
    output.encode("utf-8")  # valid text
    assert_usable(box)


def test_writes_outside_the_repository_do_not_reach_the_host(box: Sandbox) -> None:
    name = f"aem-escape-{uuid.uuid4().hex}"
    targets = [f"/{name}", f"/etc/{name}", f"/tmp/{name}", f"/testbed/../{name}", f"/root/{name}"]
    for target in targets:
        box.exec(f"echo pwned > {target}")
    for target in targets:
        assert not os.path.exists(os.path.normpath(target))
    assert_usable(box)


def test_killing_pid_1_does_not_break_the_sandbox(box: Sandbox) -> None:
    box.exec("kill -TERM 1; kill -KILL 1; kill -INT 1; kill -HUP 1", timeout=5)
    assert_usable(box)


def test_mount_and_chroot_are_refused(box: Sandbox) -> None:
    attempts = {
        "mount": "mount -t tmpfs none /mnt",
        "remount": "mount -o remount,rw /",
        "chroot": "chroot / true",
        "proc": "mount -t proc proc /mnt",
    }
    for name, command in attempts.items():
        code, output = box.exec(command)
        assert code != 0, f"{name} succeeded: {output}"
    assert_usable(box)


def test_disk_filling_write_is_bounded(box: Sandbox) -> None:
    code, output = box.exec("dd if=/dev/zero of=big.bin bs=1M count=1024", timeout=60)
    assert code != 0
    size = int(box.exec("stat -c %s big.bin").output)
    assert size <= TEST_LIMITS.file_size
    box.exec("rm -f big.bin")
    assert_usable(box)


@pytest.mark.docker
def test_docker_tmp_is_a_bounded_tmpfs(docker_engine: None, instance_image: str) -> None:
    from sandboxes.docker_sandbox import DockerSandbox

    with DockerSandbox(instance_image, limits=TEST_LIMITS) as box:
        code, output = box.exec("dd if=/dev/zero of=/tmp/fill bs=1M count=100")
        assert code != 0 and "No space left" in output
        assert_usable(box)


@pytest.mark.docker
def test_a_hung_exec_stream_is_bounded_on_the_client_side(
    docker_engine: None, instance_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even if the in-container timeout fails, ``exec`` returns and the sandbox recovers."""
    from sandboxes import docker_sandbox

    with docker_sandbox.DockerSandbox(instance_image, limits=TEST_LIMITS) as box:
        box.write_file("kept.txt", "files survive a recycle\n")
        monkeypatch.setattr(docker_sandbox, "_WRAPPER", "sleep 600")  # no timeout inside
        monkeypatch.setattr(docker_sandbox, "_CLIENT_GRACE", 1.0)
        result = box.exec("true", timeout=1)
        assert result.exit_code == 137 and "restarted" in result.output
        monkeypatch.undo()
        assert box.read_file("kept.txt") == "files survive a recycle\n"
        assert_usable(box)


@pytest.mark.docker
def test_parent_killed_mid_episode_leaves_no_container_after_gc(
    docker_engine: None, instance_image: str
) -> None:
    import docker

    from sandboxes import gc
    from sandboxes.docker_engine import client_session

    script = textwrap.dedent(
        f"""
        import sys, time
        from sandboxes.docker_sandbox import DockerSandbox
        box = DockerSandbox({instance_image!r})
        box.exec("echo busy")
        print(box.container_id, flush=True)
        time.sleep(600)
        """
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": root}
    argv = [sys.executable, "-c", script]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, env=env) as child:
        try:
            assert child.stdout is not None
            container_id = child.stdout.readline().decode().strip()
        finally:
            child.kill()
    with client_session() as client:
        assert client.containers.get(container_id).status == "running"  # orphaned, still there
        reaped = gc(client=client)
        assert container_id in [item.container_id for item in reaped]
        with pytest.raises(docker.errors.NotFound):
            client.containers.get(container_id)


@pytest.mark.docker
def test_docker_containers_are_created_hardened(docker_engine: None, instance_image: str) -> None:
    from sandboxes.docker_engine import client_session
    from sandboxes.docker_sandbox import DROPPED_CAPABILITIES, DockerSandbox
    from sandboxes.owner import current_owner

    with DockerSandbox(instance_image, limits=TEST_LIMITS) as box, client_session() as client:
        attrs = client.containers.get(box.container_id).attrs
    host = attrs["HostConfig"]
    assert host["NetworkMode"] == "none"
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert set(host["CapDrop"]) == set(DROPPED_CAPABILITIES) and not host["CapAdd"]
    assert not host["Privileged"]
    assert host["Memory"] == host["MemorySwap"] == 256 << 20
    assert host["PidsLimit"] == TEST_LIMITS.pids
    assert {"Name": "fsize", "Soft": 64 << 20, "Hard": 64 << 20} in host["Ulimits"]
    assert attrs["Config"]["Labels"].items() >= current_owner().labels().items()
