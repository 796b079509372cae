"""The multi-node Ray head's address (workflow/scripts/verl/head_address.sh), run for real with stand-ins
for `ip` and `getent` that answer as a node with a management network, an InfiniBand one and a
Debian-style 127.0.1.1 hostname entry would."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "workflow" / "scripts" / "verl" / "head_address.sh"

FAKES = {
    "getent": 'case "$2" in gpu08) echo "10.1.2.4      STREAM gpu08" ;; lo-host) echo "127.0.1.1 STREAM lo-host" ;; *) exit 2 ;; esac\n',
    "ip": """case "$*" in
  "-4 route get 10.1.2.4") echo "10.1.2.4 dev ib0 src 10.1.2.3 uid 0"; echo "    cache" ;;
  "-4 route get 127.0.1.1") echo "local 127.0.1.1 dev lo src 127.0.0.1 uid 0"; echo "    cache <local>" ;;
  "-4 -o addr show dev ib0") echo "5: ib0    inet 10.9.0.3/16 brd 10.9.255.255 scope global ib0\\\\       valid_lft forever" ;;
  "-4 -o addr show dev eno1") echo "2: eno1    inet 192.168.0.3/24 brd 192.168.0.255 scope global eno1" ;;
  *) echo "ip: unexpected $*" >&2; exit 1 ;;
esac
""",
    # what the launcher used to read: a Debian-style /etc/hosts answer, then the management network
    "hostname": 'echo "127.0.1.1 192.168.0.3"\n',
}


@pytest.fixture
def env(tmp_path):
    for name, body in FAKES.items():
        (tmp_path / name).write_text("#!/usr/bin/env bash\n" + body)
        (tmp_path / name).chmod(0o755)
    out = {k: v for k, v in os.environ.items() if k != "VERL_HEAD_IFACE"}
    out["PATH"] = f"{tmp_path}{os.pathsep}{out['PATH']}"
    return out


def head_address(env, worker, **extra):
    return subprocess.run(["bash", str(SCRIPT), worker], env={**env, **extra}, capture_output=True, text=True)


def test_the_head_is_reached_at_the_source_address_of_its_route_to_the_worker(env):
    res = head_address(env, "gpu08")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "10.1.2.3"  # not `hostname --ip-address`'s first word, 127.0.1.1


def test_a_configured_interface_names_the_address(env):
    res = head_address(env, "gpu08", VERL_HEAD_IFACE="ib0")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "10.9.0.3"


def test_a_loopback_address_is_refused_with_what_to_set(env):
    res = head_address(env, "lo-host")
    assert res.returncode != 0 and res.stdout == ""
    assert "loopback 127.0.0.1" in res.stderr and "VERL_HEAD_IFACE" in res.stderr


def test_an_unresolvable_worker_is_refused(env):
    res = head_address(env, "nowhere")
    assert res.returncode != 0 and "cannot resolve worker nowhere" in res.stderr

