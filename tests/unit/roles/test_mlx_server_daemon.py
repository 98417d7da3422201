"""mlx_server's LaunchDaemon phase on this Linux machine standing in for a Mac: the role's own
tasks run against stand-ins of launchctl (launchd's domains as a file's lines: the system
domain needs root, a gui/ domain exists only while its user is logged in at the screen),
sudo (the caller counts as root) and plutil (macos_tools/). A fresh Mac gets the daemon
bootstrapped into the system domain, a second run changes nothing, the LaunchAgent of earlier
versions is booted out of the user's domains and removed, a changed plist is booted out and in
again, and a changed key restarts the daemon. What a real Mac adds (launchd itself, a boot
without a login, Metal) is not here."""

from __future__ import annotations

import getpass
import grp
import os
import plistlib
import re
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.unit.roles.localhost_play import play_on_localhost

HERE = Path(__file__).parent
LABEL = "com.llmfleet.vllm-mlx"
KEY = "mac-studio-key"
UID = str(os.getuid())
USER = getpass.getuser()
GROUP = grp.getgrgid(os.getgid()).gr_name


@dataclass(frozen=True)
class Mac:
    home: Path
    daemons: Path
    jobs: Path
    env: dict[str, str]

    @property
    def plist(self) -> Path:
        return self.daemons / f"{LABEL}.plist"

    @property
    def agent_plist(self) -> Path:
        return self.home / "Library" / "LaunchAgents" / f"{LABEL}.plist"

    @property
    def key_file(self) -> Path:
        return self.home / ".config" / "llmfleet" / "vllm-mlx.key"

    def serve(self, *options: str, **changes: object) -> int:
        """The service phase with the test's settings (and ``changes``; ``options`` for
        ansible-playbook): how many tasks changed something."""
        extra = {
            "mlx_server_home": str(self.home),
            "mlx_server_owner": USER,
            "mlx_server_host": "0.0.0.0",
            "mlx_server_port": 8000,
            "mlx_server_api_key": KEY,
            "mlx_server_served_model_name": "qwen2.5-coder-32b",
            # What this machine cannot have: /Library/LaunchDaemons, root:wheel.
            "__mlx_server_daemon_dir": str(self.daemons),
            "__mlx_server_plist_owner": USER,
            "__mlx_server_plist_group": GROUP,
            **changes,
        }
        proc = play_on_localhost(HERE / "mlx_server_service.yml", extra, *options, env=self.env)
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
        found = re.search(r"^localhost\s+: ok=\d+\s+changed=(\d+)", proc.stdout, re.M)
        assert found, proc.stdout[-3000:]
        return int(found[1])

    def services(self) -> dict[tuple[str, str], str]:
        """What launchd has loaded: (domain, label) -> PID."""
        lines = [line.split("\t") for line in self.jobs.read_text().splitlines() if line]
        return {(line[0], line[1]): line[2] for line in lines}

    def launchctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["launchctl", *args], capture_output=True, text=True, check=False, env=self.env
        )


@pytest.fixture
def mac(tmp_path: Path) -> Mac:
    home = tmp_path / "Users" / "dev"
    home.mkdir(parents=True)
    daemons = tmp_path / "Library" / "LaunchDaemons"
    daemons.mkdir(parents=True)
    jobs = tmp_path / "launchd-jobs"
    jobs.write_text("")
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"MACOS_STAND_IN_ROOT", "LAUNCHCTL_GUI_UIDS"}
    }
    env |= {
        "PATH": f"{HERE / 'macos_tools'}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(home),
        "LAUNCHCTL_JOBS": str(jobs),
        # Tests run as root too: sudo to root is then skipped unless Ansible is told not to.
        "ANSIBLE_BECOME_ALLOW_SAME_USER": "true",
    }
    return Mac(home, daemons, jobs, env)


def load(path: Path) -> dict:
    with path.open("rb") as handle:
        plist = plistlib.load(handle)
    assert isinstance(plist, dict)
    return plist


def test_a_fresh_mac_gets_the_daemon_bootstrapped_then_nothing_changes(mac: Mac) -> None:
    assert mac.serve() > 0
    assert set(mac.services()) == {("system", LABEL)}
    plist = load(mac.plist)
    assert plist["UserName"] == USER and "GroupName" not in plist
    assert plist["RunAtLoad"] is True and plist["KeepAlive"] is True
    assert plist["WorkingDirectory"] == str(mac.home)
    env = plist["EnvironmentVariables"]
    assert env["HOME"] == str(mac.home) and env["USER"] == USER
    assert env["VLLM_MLX_API_KEY_FILE"] == str(mac.key_file)
    assert stat.S_IMODE(mac.plist.stat().st_mode) == 0o644
    # The key is in a file only the daemon's user reads, never in the plist: anyone may
    # `launchctl print` a system service, environment included.
    assert mac.key_file.read_text().strip() == KEY
    assert stat.S_IMODE(mac.key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(mac.key_file.parent.stat().st_mode) == 0o700
    assert KEY not in mac.plist.read_text()
    printed = mac.launchctl("print", f"system/{LABEL}")
    assert printed.returncode == 0 and "state = running" in printed.stdout
    assert KEY not in printed.stdout
    log = mac.home / "Library" / "Logs" / "llmfleet" / "vllm-mlx.log"
    assert log.is_file()
    pid = mac.services()[("system", LABEL)]
    assert mac.serve() == 0
    assert mac.serve("--check", "--diff") == 0
    assert mac.services() == {("system", LABEL): pid}, "a converged Mac keeps its process"


@pytest.mark.parametrize("logged_in", [True, False], ids=["logged-in", "nobody-logged-in"])
def test_the_launchagent_of_earlier_versions_is_booted_out_and_removed(
    mac: Mac, logged_in: bool
) -> None:
    """Earlier versions loaded an agent over SSH: in user/<uid>, and in gui/<uid> while the
    user was logged in at the screen. Without a login there is no gui/ domain at all."""
    mac.agent_plist.parent.mkdir(parents=True)
    with mac.agent_plist.open("wb") as handle:
        plistlib.dump({"Label": LABEL, "ProgramArguments": ["/usr/bin/true"]}, handle)
    domains = [f"user/{UID}"] + ([f"gui/{UID}"] if logged_in else [])
    mac.jobs.write_text(
        "".join(f"{domain}\t{LABEL}\t612\t-\t{mac.agent_plist}\n" for domain in domains)
    )
    if logged_in:
        mac.env["LAUNCHCTL_GUI_UIDS"] = UID
    assert mac.serve() > 0
    assert not mac.agent_plist.exists()
    assert set(mac.services()) == {("system", LABEL)}
    assert mac.serve() == 0


def test_a_changed_plist_is_loaded_again_and_a_changed_key_restarts_the_daemon(
    mac: Mac,
) -> None:
    mac.serve()
    first = mac.services()[("system", LABEL)]
    # launchd reads a plist only when it is bootstrapped: booted out and in again.
    assert mac.serve(mlx_server_port=8001) > 0
    second = mac.services()[("system", LABEL)]
    assert second != first
    assert "8001" in load(mac.plist)["ProgramArguments"]
    # The key is read by the launcher at start: kickstart -k, the plist unchanged.
    before = mac.plist.read_bytes()
    assert mac.serve(mlx_server_port=8001, mlx_server_api_key="another-key") > 0
    assert mac.services()[("system", LABEL)] not in {first, second}
    assert mac.plist.read_bytes() == before
    assert mac.key_file.read_text().strip() == "another-key"
