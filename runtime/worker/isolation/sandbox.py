"""Starting an isolated agent's sandbox: bubblewrap (Debian's `bubblewrap`, /usr/bin/bwrap)
around a bare Python running child.py (docs/adr/0036-isolated-agents.md).

What the sandbox is, in bwrap's terms, and why:
- every namespace unshared (user, pid, net, ipc, uts, cgroup), as uid/gid 65534 with
  no capabilities: no network at all, not even the host's loopback (PostgreSQL, Redis
  and the gateway are unreachable; model and tool calls go over the pipe to the
  harness, which calls the gateway as in process);
- a root of nothing but what is listed, read-only: /usr (and the /lib, /bin links),
  the interpreter's own prefix, and, file by file, the modules the child needs (this
  package, runtime/errors.py) and the agent's module with its packages' __init__.py.
  Not the repository: its settings, .steward/secrets.env and the rest are not there;
- a private /proc of its own pid namespace (the harness's /proc/<pid>/environ is not
  in it), a minimal /dev, and a size-bound tmpfs at /tmp, the scratch directory, gone
  with the sandbox;
- an environment built from an allow-list (ENVIRONMENT), never the worker's minus its
  secrets: --clearenv, then only these;
- --die-with-parent: a killed worker takes its sandboxes with it.
The harness starts it with an empty environment too: bwrap itself sees no secret.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from runtime.errors import StewardError

BWRAP = "/usr/bin/bwrap"
NOBODY = "65534"
SCRATCH_BYTES = 64 * 1024 * 1024
# The child's address space (RLIMIT_AS, set by child.py before it imports agent code).
MEMORY_BYTES = 1024 * 1024 * 1024
# The whole environment inside the sandbox: an allow-list.
ENVIRONMENT = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp", "TMPDIR": "/tmp", "PYTHONHASHSEED": "0"}
# The modules child.py imports, relative to the source root that holds `runtime`.
CHILD_MODULES = (
    "runtime/__init__.py",
    "runtime/errors.py",
    "runtime/worker/__init__.py",
    "runtime/worker/isolation/__init__.py",
    "runtime/worker/isolation/protocol.py",
    "runtime/worker/isolation/child.py",
)
SOURCE_ROOT = Path(__file__).resolve().parents[3]


class IsolationUnavailable(StewardError):
    """An isolated agent cannot run here: it never runs unsandboxed instead."""

    code = "ISOLATION_UNAVAILABLE"
    status = 503


def bwrap() -> str:
    """The bwrap binary, or IsolationUnavailable saying how to install it."""
    found = BWRAP if os.access(BWRAP, os.X_OK) else shutil.which("bwrap", path="/usr/bin:/bin:/usr/local/bin")
    if not found:
        raise IsolationUnavailable(
            "isolation='process' needs bubblewrap (/usr/bin/bwrap): apt-get install -y bubblewrap; "
            "the agent is never run without its sandbox"
        )
    return found


def interpreter() -> tuple[str, str]:
    """The base interpreter (not the virtualenv's: the sandbox has no site-packages) and
    the prefix it lives under."""
    prefix = os.path.realpath(sys.base_prefix)
    name = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (os.path.join(prefix, "bin", name), os.path.realpath(sys.executable)):
        if os.access(candidate, os.X_OK):
            return candidate, prefix
    raise IsolationUnavailable(f"no interpreter found under {prefix} for the sandbox")


def module_files(module) -> tuple[str, list[str]]:
    """The agent module's file and its packages' __init__.py files, and the source root
    they hang from (what sys.path needs inside the sandbox)."""
    name = module.__name__
    path = Path(module.__file__).resolve()
    parts = name.split(".")
    is_package = path.name == "__init__.py"
    root = path.parents[len(parts) if is_package else len(parts) - 1]
    files = [str(path)]
    directory = path.parent if not is_package else path.parent.parent
    for _ in range(len(parts) - 1):
        init = directory / "__init__.py"
        if init.exists():
            files.append(str(init))
        directory = directory.parent
    return str(root), files


def command(agent_module) -> tuple[list[str], list[str]]:
    """bwrap's argv for a sandbox that runs child.py, and the sys.path it is given."""
    python, prefix = interpreter()
    argv = [bwrap(), "--unshare-all", "--unshare-user", "--uid", NOBODY, "--gid", NOBODY]
    argv += ["--die-with-parent", "--new-session", "--clearenv", "--cap-drop", "ALL"]
    for key, value in ENVIRONMENT.items():
        argv += ["--setenv", key, value]
    argv += ["--ro-bind", "/usr", "/usr"]
    for link in ("/bin", "/lib", "/lib64", "/lib32", "/sbin"):
        if os.path.islink(link):
            argv += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            argv += ["--ro-bind", link, link]
    if not prefix.startswith("/usr/"):
        argv += ["--ro-bind", prefix, prefix]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--size", str(SCRATCH_BYTES), "--tmpfs", "/tmp", "--chdir", "/tmp"]
    files = [str(SOURCE_ROOT / relative) for relative in CHILD_MODULES]
    agent_root, agent_files = module_files(agent_module)
    for path in dict.fromkeys(files + agent_files):
        argv += ["--ro-bind", path, path]
    argv += ["--remount-ro", "/"]  # bwrap's root is a tmpfs: read-only too, /tmp apart
    paths = list(dict.fromkeys([agent_root, str(SOURCE_ROOT)]))
    entry = (
        f"import sys; sys.path[:0] = {[str(SOURCE_ROOT)]!r}; from runtime.worker.isolation.child import main; main()"
    )
    argv += ["--", python, "-I", "-S", "-B", "-c", entry]
    return argv, paths


def start(agent_module) -> tuple[subprocess.Popen, list[str]]:
    argv, paths = command(agent_module)
    process = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"PATH": ENVIRONMENT["PATH"]},  # bwrap itself sees no secret either
        close_fds=True,
        bufsize=0,
    )
    return process, paths
