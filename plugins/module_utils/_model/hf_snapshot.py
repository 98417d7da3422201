# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Model weights from a Hugging Face Hub at a pinned revision, with huggingface_hub.

``resolve`` asks the hub what a revision is (its commit sha) and holds (the files, their
sizes and hashes, filtered as ``snapshot_download`` filters them). On top of it, ``read``
(module hf_snapshot_info) can add the repository's parsed config.json, and ``download``
(module hf_snapshot) downloads that commit into a local folder and says which files the
download wrote. Both modules take HUB_OPTIONS.
Hub failures become ``HubRequestError`` with a message naming the repo, the revision and
the hub's reason. The token goes to huggingface_hub as an argument only: never into the
environment, a message or a result.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import stat
import tempfile
import traceback

from ansible.module_utils.basic import missing_required_lib

# huggingface_hub reads these when it is imported: no telemetry, and no progress bars
# (a module's output is captured; bars would only fill it).
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"

HUB_IMPORT_ERROR = None
try:
    from huggingface_hub import HfApi, hf_hub_download, snapshot_download
    from huggingface_hub import constants as hub_constants
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        HFValidationError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )
    from huggingface_hub.utils import disable_progress_bars, filter_repo_objects
except ImportError:
    HUB_IMPORT_ERROR = traceback.format_exc()

HUB_LIBRARY = "huggingface_hub"
HUB_LIBRARY_URL = "https://pypi.org/project/huggingface-hub/"
CONFIG_FILE = "config.json"

# The options hf_snapshot and hf_snapshot_info share (doc fragment llmfleet.cluster.hf_hub).
HUB_OPTIONS = {
    "repo_id": {"type": "str", "required": True},
    "revision": {"type": "str", "default": "main"},
    "endpoint": {"type": "str"},
    "token": {"type": "str", "no_log": True},
    "allow_patterns": {"type": "list", "elements": "str"},
    "ignore_patterns": {"type": "list", "elements": "str"},
}


class HubRequestError(Exception):
    """The hub or the local folder failed the request; the message says why."""


def hub_args(params):
    """The HUB_OPTIONS of a module's params, as keyword arguments of ``read`` and ``download``."""
    return {name: params[name] for name in HUB_OPTIONS}


def require_hub_library(module):
    """Fail ``module`` with the usual message when huggingface_hub cannot be imported."""
    if HUB_IMPORT_ERROR is not None:
        module.fail_json(
            msg=missing_required_lib(HUB_LIBRARY, url=HUB_LIBRARY_URL), exception=HUB_IMPORT_ERROR
        )


def transport_errors():
    """Exceptions that mean the endpoint could not be reached (huggingface_hub 1.x speaks
    through httpx, 2.x through httpx2)."""
    found = [ConnectionError, TimeoutError]
    for name in ("httpx2", "httpx"):
        try:
            found.append(importlib.import_module(name).TransportError)
        except (ImportError, AttributeError):
            continue
    return tuple(found)


def hub_endpoint(endpoint=None):
    """The hub's URL: ``endpoint``, else huggingface_hub's (``HF_ENDPOINT`` or huggingface.co)."""
    return (endpoint or hub_constants.ENDPOINT).rstrip("/")


def scrub(text, token):
    """``text`` without the token, should a server or a library have echoed it."""
    return text.replace(token, "********") if token else text


def hub_reason(error):
    """The hub's own words (its error message), else the first line of the exception."""
    message = (getattr(error, "server_message", None) or "").strip()
    if message:
        return "; ".join(message.splitlines())
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


MESSAGES = {
    "revision": "revision {revision!r} of {repo_id} not found on {endpoint}: "
    "no branch, tag or commit has that name",
    "token_refused": "the hub refused the token for {what} (HTTP 401: {reason})",
    "token_needed": "the hub wants a token for {what} (HTTP 401: {reason}): "
    "the repository needs a token, give one in the token option",
    "gated": "{what} is gated: the token's account must accept its terms on the hub first",
    "repo": "repository {repo_id} not found on {endpoint} "
    "(a private one needs a token that can see it)",
    "entry": "a file of {what} is not on the hub: {reason}",
    "http": "the hub answered HTTP {status} for {what}: {reason}",
    "unreachable": "the hub at {endpoint} is unreachable while reading {what}: {kind}: {error}",
    "invalid": "invalid request for {what}: {error}",
}


def error_kinds():
    """(exception class, key of MESSAGES), the most specific first."""
    return [
        (RevisionNotFoundError, "revision"),
        (GatedRepoError, "gated"),
        (RepositoryNotFoundError, "repo"),
        (EntryNotFoundError, "entry"),
        (HfHubHTTPError, "http"),
        (transport_errors(), "unreachable"),
        (HFValidationError, "invalid"),
    ]


def explain(error, repo_id, revision, endpoint, token_given):
    """One sentence on a failed hub request (what was asked, and the hub's reason); None
    for an exception that is not about the hub."""
    status = getattr(getattr(error, "response", None), "status_code", None)
    if isinstance(error, HfHubHTTPError) and status == 401:
        kind = "token_refused" if token_given else "token_needed"
    else:
        kind = next((key for cls, key in error_kinds() if isinstance(error, cls)), None)
    if kind is None:
        return None
    return MESSAGES[kind].format(
        what="{0} at revision {1!r} on {2}".format(repo_id, revision, endpoint),
        repo_id=repo_id,
        revision=revision,
        endpoint=endpoint,
        status=status,
        reason=hub_reason(error),
        kind=type(error).__name__,
        error=error,
    )


@contextlib.contextmanager
def hub_errors(repo_id, revision, endpoint, token, doing=None):
    """Turns a failed hub request into HubRequestError (``explain``'s sentence, without the
    token); an OSError too when ``doing`` says what was being done (a local folder's failure)."""
    try:
        yield
    except HubRequestError:
        raise
    except Exception as error:
        message = explain(error, repo_id, revision, endpoint, token is not None)
        if message is None and doing and isinstance(error, OSError):
            message = "{0} failed: {1}: {2}".format(doing, type(error).__name__, error)
        if message is None:
            raise
        raise HubRequestError(scrub(message, token)) from error


def file_entry(sibling):
    lfs = getattr(sibling, "lfs", None)
    return {
        "path": sibling.rfilename,
        "size": sibling.size,
        "sha256": lfs.sha256 if lfs is not None else None,
        "git_sha1": sibling.blob_id,
    }


def read_revision(api, repo_id, revision, allow_patterns=None, ignore_patterns=None):
    """The commit ``revision`` names and the files it holds that the patterns select."""
    info = api.model_info(repo_id, revision=revision, files_metadata=True)
    if not info.sha:
        raise HubRequestError(
            "the hub gave no commit sha for {0} at revision {1!r}".format(repo_id, revision)
        )
    selected = filter_repo_objects(
        info.siblings or [],
        allow_patterns=allow_patterns,
        ignore_patterns=ignore_patterns,
        key=lambda sibling: sibling.rfilename,
    )
    files = sorted((file_entry(s) for s in selected), key=lambda entry: entry["path"])
    return {
        "repo_id": repo_id,
        "requested_revision": revision,
        "revision": info.sha,
        "files": files,
        "total_bytes": sum(entry["size"] or 0 for entry in files),
    }


def local_state(local_dir, paths):
    """path -> (size, mtime in ns, inode) of each of ``paths`` that is a file in ``local_dir``."""
    state = {}
    for path in paths:
        try:
            info = os.stat(os.path.join(local_dir, path))
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            state[path] = (info.st_size, info.st_mtime_ns, info.st_ino)
    return state


def changed_paths(before, after):
    """Paths that are new in ``after``, or whose size, mtime or inode differ from ``before``."""
    return sorted(path for path, seen in after.items() if before.get(path) != seen)


def missing_or_resized(local_dir, files):
    """Paths of ``files`` that ``local_dir`` lacks or holds with another size."""
    state = local_state(local_dir, [entry["path"] for entry in files])
    return [
        entry["path"]
        for entry in files
        if entry["path"] not in state or state[entry["path"]][0] != entry["size"]
    ]


def file_diff(local_dir, paths, before, files):
    """Ansible's before/after for the files a download writes: ``path: size`` lines."""
    sizes = {entry["path"]: entry["size"] for entry in files}
    return {
        "before_header": local_dir,
        "after_header": local_dir,
        "before": "".join(
            "{0}: {1}\n".format(p, before[p][0] if p in before else "absent") for p in paths
        ),
        "after": "".join("{0}: {1}\n".format(p, sizes.get(p)) for p in paths),
    }


def resolve(
    repo_id,
    *,
    revision="main",
    endpoint=None,
    token=None,
    allow_patterns=None,
    ignore_patterns=None,
):
    """What both modules start with: the commit ``revision`` names on the hub and the files
    the patterns select (``read_revision``), plus the hub's URL; raises HubRequestError."""
    disable_progress_bars()
    url = hub_endpoint(endpoint)
    api = HfApi(endpoint=url, token=token)
    with hub_errors(repo_id, revision, url, token):
        result = read_revision(api, repo_id, revision, allow_patterns, ignore_patterns)
    result["endpoint"] = url
    return result


def read(read_config=False, **hub):
    """hf_snapshot_info's result (without ``changed``); raises HubRequestError.

    ``hub`` are the HUB_OPTIONS. With ``read_config``, ``config`` is the repository's
    config.json at the resolved commit when the patterns select it, else ``{}``.
    """
    result = resolve(**hub)
    selected = any(entry["path"] == CONFIG_FILE for entry in result["files"])
    result["config"] = model_config(result, hub.get("token")) if read_config and selected else {}
    return result


def model_config(result, token):
    """config.json of the resolved commit, downloaded into a temporary folder and parsed."""
    repo_id, commit, url = result["repo_id"], result["revision"], result["endpoint"]
    where = "{0} of {1} at revision {2!r} ({3})".format(
        CONFIG_FILE, repo_id, result["requested_revision"], commit
    )
    with tempfile.TemporaryDirectory(prefix="llmfleet-hf-config-") as folder:
        with hub_errors(repo_id, commit, url, token, doing="downloading " + where):
            path = hf_hub_download(
                repo_id, CONFIG_FILE, revision=commit, local_dir=folder, token=token, endpoint=url
            )
        with open(path, "rb") as handle:
            content = handle.read()
    try:
        config = json.loads(content)
    except ValueError as error:
        raise HubRequestError("{0} is not valid JSON: {1}".format(where, error)) from error
    if not isinstance(config, dict):
        raise HubRequestError(
            "{0} is not a JSON object but a {1}".format(where, type(config).__name__)
        )
    return config


def download(local_dir, check_mode=False, **hub):
    """hf_snapshot's result (without ``changed``); raises HubRequestError.

    ``hub`` are the HUB_OPTIONS. The resolved commit is downloaded into ``local_dir``; in
    check mode nothing is, and ``downloaded`` lists the files missing or of another size there.
    """
    result = resolve(**hub)
    local_dir = os.path.abspath(local_dir)
    paths = [entry["path"] for entry in result["files"]]
    before = local_state(local_dir, paths)
    result["local_dir"] = local_dir
    if check_mode:
        downloaded = missing_or_resized(local_dir, result["files"])
    else:
        token = hub.get("token")
        fetch(result, local_dir, token, hub.get("allow_patterns"), hub.get("ignore_patterns"))
        downloaded = changed_paths(before, local_state(local_dir, paths))
    result["downloaded"] = downloaded
    result["diff"] = file_diff(local_dir, downloaded, before, result["files"])
    return result


def fetch(result, local_dir, token, allow_patterns, ignore_patterns):
    """snapshot_download of the resolved commit; then every selected file must be there.

    huggingface_hub trusts its bookkeeping for a file changed within a second of its
    download; a file still missing or of the wrong size afterwards is downloaded again
    with force_download."""
    repo_id, commit, url = result["repo_id"], result["revision"], result["endpoint"]
    common = {"revision": commit, "local_dir": local_dir, "token": token, "endpoint": url}
    doing = "downloading {0} at {1} into {2}".format(repo_id, commit, local_dir)
    with hub_errors(repo_id, commit, url, token, doing=doing):
        os.makedirs(local_dir, exist_ok=True)
        snapshot_download(
            repo_id, allow_patterns=allow_patterns, ignore_patterns=ignore_patterns, **common
        )
        for path in missing_or_resized(local_dir, result["files"]):
            hf_hub_download(repo_id, path, force_download=True, **common)
    missing = missing_or_resized(local_dir, result["files"])
    if missing:
        raise HubRequestError(
            "after downloading {0} at {1}, {2} lacks or has the wrong size of: {3}".format(
                repo_id, commit, local_dir, ", ".join(missing)
            )
        )
