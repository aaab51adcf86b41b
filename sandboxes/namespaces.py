"""The Linux namespaces a bubblewrap sandbox runs in, and whether this host lets it make them.

Why a module of its own: the sandbox's command line and the backend chooser's probe must ask
for the same namespaces, or the probe would pass on hosts where sandboxes then fail (an
unprivileged container, where creating namespaces is refused).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cache

#: How long the probe may take; bubblewrap starts in milliseconds where it works.
PROBE_TIMEOUT_S = 20


def namespace_flags(as_root: bool) -> list[str]:
    """bwrap's namespace flags: as root the sandbox drops to nobody inside without a user
    namespace (root can switch ids itself); otherwise it maps the caller to root in a new one."""
    if as_root:
        return [
            *("--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"),
            *("--unshare-cgroup-try", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"),
        ]
    return [
        *("--unshare-all", "--unshare-user", "--uid", "0", "--gid", "0"),
        "--disable-userns",
    ]


@cache
def bwrap_unavailable_reason() -> str | None:
    """None when bubblewrap is installed and can create a sandbox's namespaces here, else
    one line saying why not and what to do (probed once per process)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    argv = [bwrap, *namespace_flags(os.geteuid() == 0), "--die-with-parent"]
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "true"]
    try:
        probe = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap does not start here ({type(exc).__name__}: {exc})"
    if probe.returncode == 0:
        return None
    said = " ".join(probe.stderr.split()) or f"exit status {probe.returncode}"
    return (
        f"bubblewrap cannot create a sandbox's namespaces here ({said}); this happens inside "
        "unprivileged containers: run on the host, in a container started with "
        "--privileged (or --security-opt seccomp=unconfined --cap-add SYS_ADMIN), or use Docker"
    )
