"""Build and cache the lab node image.

Two stages, each tagged with a digest of its recipe so a rebuild happens only when the
recipe changes:

* ``localhost/llmfleet-lab-rootfs:<digest>``: Debian bookworm from debootstrap, imported;
* ``localhost/llmfleet-lab-node:<digest>``: ``assets/image/Containerfile`` on top of it
  (packages, vLLM's CPU build, the hardware emulators);
* ``localhost/llmfleet-lab-hub:<digest>``: ``assets/image/Containerfile.hub`` on top of the
  node image: the generated tiny model, published by the lab's Hub server;
* ``localhost/llmfleet-lab-runtime:<digest>``: ``assets/image/Containerfile.runtime`` on top
  of the root file system: the vLLM/Ray image of the container path, saved as a Docker
  archive (``runtime_archive()``) that every node mounts and loads into its Docker under
  ``RUNTIME_IMAGE``.

Images live in the container engine's storage, outside the checkout, so a fresh clone on
the same machine reuses them. Nothing names a host: the Debian mirror and the pip settings
are read from the machine that builds.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from llmfleet_lab import podman
from llmfleet_lab.errors import LabError

ASSETS_DIR = Path(__file__).parent / "assets" / "image"
SUITE = "bookworm"
DEBOOTSTRAP_PACKAGES = (
    "python3",
    "systemd",
    "systemd-sysv",
    "dbus",
    "udev",
    "iproute2",
    "ca-certificates",
)
ROOTFS_REPOSITORY = "localhost/llmfleet-lab-rootfs"
NODE_REPOSITORY = "localhost/llmfleet-lab-node"
RUNTIME_REPOSITORY = "localhost/llmfleet-lab-runtime"
# The runtime image's name in each node's Docker (inventory/lab/group_vars/all/serving_path.yml).
RUNTIME_IMAGE = "localhost/llmfleet-lab/vllm-ray:lab"
# Where a node finds the archive (llmfleet-lab-images.service loads it at boot).
NODE_RUNTIME_ARCHIVE = "/usr/local/share/llmfleet-lab/images/vllm-runtime.tar"
HUB_REPOSITORY = "localhost/llmfleet-lab-hub"
# Where the build sees the certificate bundle of the machine that builds (not the
# image's own bundle path, which its ca-certificates package rewrites).
BUILD_CERT_PATH = "/run/llmfleet-build/ca-bundle.crt"


def cache_dir() -> Path:
    """Per-user cache for build logs and scratch space (outside the checkout)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    path = Path(base) / "llmfleet"
    path.mkdir(parents=True, exist_ok=True)
    return path


def digest_files(paths: Iterable[Path], root: Path, extra: Iterable[str] = ()) -> str:
    """A short, stable digest over file names relative to ``root``, their bytes, and ``extra``."""
    sha = hashlib.sha256()
    for item in extra:
        sha.update(item.encode() + b"\0")
    for path in sorted(paths):
        sha.update(str(path.relative_to(root)).encode() + b"\0")
        sha.update(path.read_bytes() + b"\0")
    return sha.hexdigest()[:16]


def recipe_files(root: Path = ASSETS_DIR) -> list[Path]:
    return [
        p
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    ]


def rootfs_tag() -> str:
    return digest_files([], ASSETS_DIR, (SUITE, *DEBOOTSTRAP_PACKAGES))


def node_tag() -> str:
    return digest_files(recipe_files(), ASSETS_DIR, (rootfs_tag(),))


def node_image_ref() -> str:
    return f"{NODE_REPOSITORY}:{node_tag()}"


def runtime_image_ref() -> str:
    return f"{RUNTIME_REPOSITORY}:{node_tag()}"


def runtime_archive() -> Path:
    """The runtime image as a Docker archive, in the cache (outside the checkout)."""
    return cache_dir() / "images" / f"llmfleet-lab-runtime-{node_tag()}.tar"


def hub_image_ref() -> str:
    """The Hub image shares the node's tag: both come from the same recipe folder."""
    return f"{HUB_REPOSITORY}:{node_tag()}"


def debian_mirror(
    sources_dir: Path = Path("/etc/apt/sources.list.d"),
    sources_list: Path = Path("/etc/apt/sources.list"),
) -> str:
    """The Debian mirror this machine already uses (deb822 or one-line format)."""
    override = os.environ.get("LLMFLEET_DEBIAN_MIRROR")
    if override:
        return override
    for path in sorted(sources_dir.glob("*.sources")) if sources_dir.is_dir() else []:
        for stanza in re.split(r"\n\s*\n", path.read_text()):
            fields = dict(
                (key.strip().lower(), value.strip())
                for key, _, value in (
                    line.partition(":") for line in stanza.splitlines() if ":" in line
                )
                if not key.startswith("#")
            )
            suites = fields.get("suites", "").split()
            if SUITE in suites and "deb" in fields.get("types", "").split():
                return str(fields["uris"].split()[0])
    if sources_list.is_file():
        for line in sources_list.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "deb" and parts[2] == SUITE:
                return parts[1]
    raise LabError(
        "no Debian mirror found for debootstrap",
        hint=f"set LLMFLEET_DEBIAN_MIRROR to a Debian mirror URL carrying {SUITE}",
    )


@dataclass
class PipSettings:
    """The builder's pip settings, forwarded into the image build."""

    build_args: dict[str, str] = field(default_factory=dict)
    volumes: list[str] = field(default_factory=list)


def _pip_config_value(key: str) -> str:
    try:
        out = subprocess.run(
            ["python3", "-m", "pip", "config", "get", key],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def host_ca_bundle(environ: Mapping[str, str] | None = None) -> Path | None:
    """The certificate bundle this machine trusts (it may hold a TLS-inspecting proxy's CA)."""
    env = os.environ if environ is None else environ
    cert = (
        env.get("PIP_CERT")
        or env.get("REQUESTS_CA_BUNDLE")
        or env.get("SSL_CERT_FILE")
        or _pip_config_value("global.cert")
    )
    return Path(cert) if cert and Path(cert).is_file() else None


def pip_settings(environ: dict[str, str] | None = None) -> PipSettings:
    """Find-links folders, the certificate bundle and proxies of the machine that builds."""
    env = os.environ if environ is None else environ
    settings = PipSettings()
    find_links = env.get("PIP_FIND_LINKS") or _pip_config_value("global.find-links")
    local_links = [p for p in find_links.split() if p and Path(p).is_dir()]
    if local_links:
        settings.build_args["PIP_FIND_LINKS"] = " ".join(local_links)
        settings.volumes += [f"{p}:{p}:ro" for p in local_links]
    cert = host_ca_bundle(env)
    if cert:
        settings.build_args["PIP_CERT"] = BUILD_CERT_PATH
        settings.volumes.append(f"{cert}:{BUILD_CERT_PATH}:ro")
    for name in ("HTTPS_PROXY", "HTTP_PROXY"):
        value = env.get(name) or env.get(name.lower())
        if value:
            settings.build_args[name] = value
    return settings


STEP_PATTERN = re.compile(r"^STEP (\d+)/(\d+): (.*)")


class BuildProgress:
    """Build progress: a live bar in a terminal, one line per step in logs (CI)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress: Progress | None = None
        self.task: TaskID | None = None
        if console.is_terminal:
            self.progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                TimeElapsedColumn(),
                console=console,
            )

    def __enter__(self) -> BuildProgress:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()

    def stage(self, description: str) -> None:
        """A new stage (debootstrap, node image): always shown."""
        if self.progress is not None:
            self.task = self.progress.add_task(description, total=None)
        else:
            self.console.print(f"[lab build] {description}", highlight=False, soft_wrap=True)

    def step(self, step: int, total: int, description: str) -> None:
        """A numbered step of the current stage: shown in logs too."""
        if self.progress is not None and self.task is not None:
            self.progress.update(
                self.task, total=total, completed=step - 1, description=description
            )
        else:
            self.console.print(
                f"[lab build] step {step}/{total}: {description}", highlight=False, soft_wrap=True
            )

    def detail(self, description: str) -> None:
        """Chatter inside a step (package names, downloads): terminal only."""
        if self.progress is not None and self.task is not None:
            self.progress.update(self.task, description=description)

    def done(self, description: str) -> None:
        if self.progress is not None and self.task is not None:
            self.progress.update(self.task, description=description, completed=1, total=1)
        else:
            self.console.print(f"[lab build] {description}", highlight=False, soft_wrap=True)


def _stream(cmd: list[str], log_path: Path, progress: BuildProgress) -> Iterator[str]:
    """Run ``cmd``, tee its output to ``log_path``, yield lines, fail with the log tail."""
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            yield line.rstrip("\n")
        rc = proc.wait()
    if rc != 0:
        tail = "\n".join(log_path.read_text().splitlines()[-25:])
        progress.stop()
        raise LabError(
            f"{cmd[0]} {cmd[1]} failed with exit code {rc}",
            detail=tail,
            hint=f"full log: {log_path}",
        )


def _build_rootfs(progress: BuildProgress) -> str:
    ref = f"{ROOTFS_REPOSITORY}:{rootfs_tag()}"
    if podman.image_exists(ref):
        return ref
    if shutil.which("debootstrap") is None:
        raise LabError("debootstrap is not installed", hint="run `make lab-deps` (apt-get)")
    mirror = debian_mirror()
    log_path = cache_dir() / f"rootfs-{rootfs_tag()}.log"
    progress.stage(f"debootstrap {SUITE} (log: {log_path})")
    with tempfile.TemporaryDirectory(dir=cache_dir(), prefix="rootfs-") as scratch:
        target = Path(scratch) / "rootfs"
        cmd = [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(DEBOOTSTRAP_PACKAGES)}",
            SUITE,
            str(target),
            mirror,
        ]
        for line in _stream(cmd, log_path, progress):
            if line.startswith("I: "):
                progress.detail(f"debootstrap: {line[3:60]}")
        progress.detail("importing the root file system")
        tar = subprocess.Popen(["tar", "-C", str(target), "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(
            ["podman", "import", "-q", "-", ref],
            stdin=tar.stdout,
            capture_output=True,
            text=True,
            check=False,
        )
        tar.wait()
        if imported.returncode != 0 or tar.returncode != 0:
            raise LabError("podman import of the root file system failed", detail=imported.stderr)
    progress.done(f"root file system {ref}")
    return ref


def _build(
    progress: BuildProgress,
    ref: str,
    containerfile: str,
    build_args: Mapping[str, str],
    rebuild: bool,
) -> str:
    """``podman build`` of one Containerfile of the recipe folder, with its progress."""
    settings = pip_settings()
    log_path = cache_dir() / f"{ref.rsplit('/', 1)[-1].replace(':', '-')}.log"
    cmd = ["podman", "build", "--layers", "-t", ref]
    if rebuild:
        cmd.append("--no-cache")
    for key, value in {**build_args, **settings.build_args}.items():
        cmd += ["--build-arg", f"{key}={value}"]
    for volume in settings.volumes:
        cmd += ["-v", volume]
    cmd += ["-f", str(ASSETS_DIR / containerfile), str(ASSETS_DIR)]
    progress.stage(f"image {ref} (log: {log_path})")
    for line in _stream(cmd, log_path, progress):
        match = STEP_PATTERN.match(line)
        if match:
            step, total, what = match.groups()
            progress.step(int(step), int(total), what[:70])
        elif line.strip():
            progress.detail(line.strip()[:70])
    progress.done(f"image {ref} built")
    return ref


def _save_runtime_archive(progress: BuildProgress, runtime: str) -> Path:
    """Save the runtime image under RUNTIME_IMAGE as a Docker archive (written aside, then
    renamed: a node never mounts half an archive)."""
    archive = runtime_archive()
    archive.parent.mkdir(parents=True, exist_ok=True)
    progress.stage(f"runtime image archive {archive.name}")
    podman.run("tag", runtime, RUNTIME_IMAGE)
    partial = archive.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    podman.run("save", "--format", "docker-archive", "-o", str(partial), RUNTIME_IMAGE, timeout=900)
    partial.rename(archive)
    for old in archive.parent.glob("llmfleet-lab-runtime-*.tar"):
        if old != archive:
            old.unlink()
    progress.done(f"runtime image saved ({archive.stat().st_size / 2**20:.0f} MiB)")
    return archive


def ensure_image(console: Console, rebuild: bool = False) -> str:
    """Return the node image reference, building whatever stage is missing (the node
    image, the Hub image on top of it, the runtime image and its archive)."""
    node, hub, runtime = node_image_ref(), hub_image_ref(), runtime_image_ref()
    built = podman.image_exists(node) and podman.image_exists(hub)
    if built and podman.image_exists(runtime) and runtime_archive().is_file() and not rebuild:
        return node
    with BuildProgress(console) as progress:
        if rebuild or not podman.image_exists(node):
            base = _build_rootfs(progress)
            _build(progress, node, "Containerfile", {"BASE_IMAGE": base}, rebuild)
        if rebuild or not podman.image_exists(hub):
            _build(progress, hub, "Containerfile.hub", {"NODE_IMAGE": node}, rebuild)
        if rebuild or not podman.image_exists(runtime):
            base = _build_rootfs(progress)
            _build(progress, runtime, "Containerfile.runtime", {"BASE_IMAGE": base}, rebuild)
        if rebuild or not runtime_archive().is_file():
            _save_runtime_archive(progress, runtime)
    return node


def prune_old_images(console: Console) -> list[str]:
    """Remove node and rootfs images whose tag no longer matches the recipe."""
    keep = {
        node_image_ref(),
        hub_image_ref(),
        runtime_image_ref(),
        f"{ROOTFS_REPOSITORY}:{rootfs_tag()}",
    }
    removed = []
    for repository in (HUB_REPOSITORY, NODE_REPOSITORY, RUNTIME_REPOSITORY, ROOTFS_REPOSITORY):
        for ref in podman.image_refs(repository):
            if ref not in keep and podman.remove_image(ref):
                removed.append(ref)
    return removed
