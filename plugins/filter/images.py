"""Filters for container images: references parsed and checked (a tag alone floats, a
digest pins), the images a host will run, and what the record on a node says runs."""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._images.needs import missing

# The grammar of docker's reference package (distribution/reference): a path of lower-case
# components separated by "/", each of letters and digits joined by ".", "_", "__" or dashes;
# a registry host (with a port) first when the first component has a "." or ":", is
# "localhost" or has upper case; a tag of up to 128 word characters, "." and "-".
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_PATH = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
_HOST_LABEL = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_REGISTRY = re.compile(rf"(?:{_HOST_LABEL}(?:\.{_HOST_LABEL})*|\[[0-9a-fA-F:.]+\])(?::[0-9]+)?")
_TAG = re.compile(r"\w[\w.-]{0,127}")
_SHA256 = re.compile(r"sha256:[0-9a-f]{64}")
# A digest left for the user to fill in (the sample inventories'): sha256:<anything>.
_PLACEHOLDER = re.compile(r"@(?:sha256:)?<[^<>]*>$")
_NAME_MAX = 255

EXPECTED = "[registry[:port]/]path[:tag]@sha256:<64 hex>, lower case, no spaces"


def _first(checks):
    """The reason of the first check that failed, or None."""
    return next((why for failed, why in checks if failed), None)


def _split(text):
    """``(parts, why)``: the parts of a reference as written, and why it is not one (None
    when it is). The digest is not judged here (see ``_digest_problem``)."""
    name_tag, digest = text.partition("@")[0], text.partition("@")[2]
    why = _first(
        [
            (any(ch.isspace() for ch in text), "it holds a space"),
            (text.count("@") > 1, "it has more than one @"),
            (text.endswith("@"), "nothing follows its @"),
            (name_tag.endswith(":"), "nothing follows the : of its tag"),
        ]
    )
    if why:
        return {"name": "", "registry": "", "repository": "", "tag": "", "digest": ""}, why
    slash, colon = name_tag.rfind("/"), name_tag.rfind(":")
    name, tag = (name_tag[:colon], name_tag[colon + 1 :]) if colon > slash else (name_tag, "")
    first, sep, rest = name.partition("/")
    has_registry = bool(sep) and (
        "." in first or ":" in first or first == "localhost" or first != first.lower()
    )
    registry, repository = (first, rest) if has_registry else ("", name)
    parts = {"name": name, "registry": registry, "repository": repository, "tag": tag}
    why = _first(
        [
            (not name, "it names no repository"),
            (
                bool(registry) and not _REGISTRY.fullmatch(registry),
                f"its registry {registry} is no host[:port]",
            ),
            (repository != repository.lower(), f"its repository {repository} has upper case"),
            (
                not _PATH.fullmatch(repository),
                f"its repository {repository} is not components of letters and digits"
                " (joined by . _ or -) separated by /",
            ),
            (
                len(name) > _NAME_MAX,
                f"its name is {len(name)} characters long (at most {_NAME_MAX})",
            ),
            (
                bool(tag) and not _TAG.fullmatch(tag),
                f"its tag {tag} is not up to 128 letters, digits, _ . and -",
            ),
        ]
    )
    return {**parts, "digest": digest}, why


def _digest_problem(digest):
    if digest and not _SHA256.fullmatch(digest):
        return f"its digest {digest} is not sha256: followed by 64 lower-case hex digits"
    return None


def _how_to_read_the_digest(tagged):
    """How to learn the digest of ``tagged`` (``name:tag``), in words."""
    return (
        f"`docker buildx imagetools inspect {tagged}` prints it (its first Digest: line, which"
        f" names every architecture), or on a Spark `docker pull {tagged}` then"
        f" `docker image inspect --format '{{{{index .RepoDigests 0}}}}' {tagged}`"
    )


def image_reference(ref):
    """A container image reference in the forms docker accepts, parsed: ``name`` (registry
    and repository as written), ``registry`` (empty when it names none: Docker Hub, or an
    image known only locally), ``repository``, ``tag`` and ``digest`` (empty when absent),
    ``pinned`` (a sha256 digest names the content), ``reference`` (the input) and ``pull``
    (what the engines pull and run: ``name@digest`` when pinned, since the digest decides and
    the tag only documents it; the reference as written otherwise)."""
    text = "" if ref is None else str(ref)
    if not text:
        raise AnsibleFilterError("image_reference: the reference is empty")
    if _PLACEHOLDER.search(text):
        raise AnsibleFilterError(
            f"image_reference: {text} is not an image reference: its digest is a placeholder"
        )
    parts, why = _split(text)
    why = why or _digest_problem(parts["digest"])
    if why:
        raise AnsibleFilterError(f"image_reference: {text} is not an image reference: {why}")
    pinned = bool(parts["digest"])
    return {
        "reference": text,
        **parts,
        "pinned": pinned,
        "pull": f"{parts['name']}@{parts['digest']}" if pinned else text,
    }


def image_reference_problems(ref, variable, allow_floating=False):
    """Why ``ref`` (the value of ``variable``) is no image reference to run, one sentence
    each; empty when it is fine. A tag alone (no digest) is refused unless
    ``allow_floating``."""
    text = "" if ref is None else str(ref)
    if not text.strip():
        return [
            f"{variable} is {text!r}: a container deployment needs an image reference named by"
            " tag and digest, e.g. vllm/vllm-openai:v0.11.0@sha256:<64 hex>"
        ]
    placeholder = _PLACEHOLDER.search(text)
    if placeholder:
        named, _parsed = _split(text[: placeholder.start()])
        tagged = f"{named['name'] or text[: placeholder.start()]}:{named['tag'] or 'latest'}"
        return [
            f"{variable} is {text!r}: its digest is a placeholder to fill in:"
            f" {_how_to_read_the_digest(tagged)}; write {tagged}@sha256:<64 hex>"
        ]
    parts, why = _split(text)
    if why:
        return [f"{variable} is {text!r}: not an image reference ({why}); expected {EXPECTED}"]
    digest_problem = _digest_problem(parts["digest"])
    if digest_problem:
        return [
            f"{variable} is {text!r}: {digest_problem} (`docker buildx imagetools inspect"
            f" {parts['name']}:{parts['tag'] or 'latest'}` prints it)"
        ]
    if parts["digest"] or boolean(allow_floating, strict=False):
        return []
    tagged = f"{parts['name']}:{parts['tag'] or 'latest'}"
    return [
        f"{variable} is {text!r}: a tag alone ({tagged}) can change under a running cluster:"
        f" name it by tag and digest, e.g. {tagged}@sha256:<64 hex>"
        f" (`docker buildx imagetools inspect {tagged}` prints it), or set"
        " llmfleet_allow_floating_image: true"
    ]


def _launches_that_run(launches, filter_name, fields):
    """Each launch of ``launches`` that runs here, with its image: a launch without an image
    or with ``runs`` false is left out; what is not a mapping is refused."""
    for launch in launches or []:
        if not isinstance(launch, dict):
            raise AnsibleFilterError(
                f"{filter_name}: each launch is a mapping of {fields}; got {launch!r}"
            )
        image = str(launch.get("image") or "")
        if image and boolean(launch.get("runs", True), strict=False):
            yield launch, image


def images_to_pull(launches):
    """The images a host will run, by engine: ``launches`` is a list of
    ``{image, engine, runs}`` (``runs`` false for a launch this host does not make in a
    container); the result maps each engine to its images, each once, in order."""
    pulls = {}
    for launch, image in _launches_that_run(launches, "images_to_pull", "image, engine and runs"):
        images = pulls.setdefault(str(launch.get("engine") or "docker"), [])
        if image not in images:
            images.append(image)
    return pulls


_NEEDS_KEYS = ("ray", "commands", "vllm_options", "mounts")


def images_to_check(launches, engine):
    """What to check in each image ``engine`` will run: one ``{image, needs}`` per launch of
    ``launches`` (as for ``images_to_pull``, each with ``needs``: ``ray``, ``commands``,
    ``vllm_options``, ``mounts``) that runs in ``engine``, in order; a launch with the same
    image and needs as an earlier one is left out."""
    checks = []
    for launch, image in _launches_that_run(
        launches, "images_to_check", "image, engine, runs and needs"
    ):
        if str(launch.get("engine") or "docker") != engine:
            continue
        needs = launch.get("needs") or {}
        if not isinstance(needs, dict) or set(needs) - set(_NEEDS_KEYS):
            raise AnsibleFilterError(
                f"images_to_check: the needs of {image} are a mapping of some of"
                f" {list(_NEEDS_KEYS)}; got {needs!r}"
            )
        check = {"image": image, "needs": needs}
        if check not in checks:
            checks.append(check)
    return checks


def _contents_problem(host, reference, contents, needs):
    if contents is None:
        return None
    if not isinstance(contents, dict):
        raise AnsibleFilterError(
            "image_contents_problems: expected what container_image_contents found;"
            f" got {contents!r}"
        )
    if contents.get("error"):
        return (
            f"{host}: image {reference} cannot be looked into: {contents['error']}; the checks"
            " run python3 in it (images with vLLM have it)"
        )
    lacks = missing(contents, needs or {})
    if not lacks:
        return None
    return f"{host}: image {reference} lacks what this launch needs: {'; '.join(lacks)}"


def image_contents_problems(results, host):
    """Why the images cannot serve the launches on ``host``, one sentence per image: what
    each lacks of its needs (see ``images_to_check``). ``results`` is the registered loop
    of module container_image_contents over ``images_to_check``'s list (each result's
    ``item`` is ``{image, needs}``); a skipped result, or one without contents (check mode,
    the image not pulled yet), is no problem."""
    if isinstance(results, dict):
        results = results.get("results") or []
    if not isinstance(results, list):
        raise AnsibleFilterError(
            f"image_contents_problems: expected a loop's results; got {results!r}"
        )
    problems = []
    for result in results:
        if not isinstance(result, dict) or result.get("skipped"):
            continue
        item = result.get("item") if isinstance(result.get("item"), dict) else {}
        problem = _contents_problem(
            host, item.get("image", "?"), result.get("contents"), item.get("needs")
        )
        if problem:
            problems.append(problem)
    return problems


def contents_lacks(contents, needs):
    """What an environment lacks of ``needs`` (as for ``images_to_check``: ``ray``,
    ``commands``, ``vllm_options``), one phrase each; ``contents`` is what module
    python_contents (a host's virtualenv) or container_image_contents found. Contents that
    could not be read are one phrase; none (check mode) is nothing."""
    if contents is None:
        return []
    if not isinstance(contents, dict) or not isinstance(needs, dict):
        raise AnsibleFilterError(
            f"contents_lacks: expected what python_contents found and a mapping of needs;"
            f" got {contents!r} and {needs!r}"
        )
    if contents.get("error"):
        return [f"it could not be looked into: {contents['error']}"]
    return missing(contents, needs)


def images_pull_failures(failed_result):
    """What a failed pull task said, one sentence per image that failed: the reference, the
    module's message and the engine's last line of error output (``failed_result`` is
    ``ansible_failed_result``: one result, or a loop's ``results``)."""
    if not isinstance(failed_result, dict):
        return []
    results = failed_result.get("results")
    results = results if isinstance(results, list) else [failed_result]
    sentences = []
    for result in results:
        if not isinstance(result, dict) or not result.get("failed"):
            continue
        item = result.get("item")
        reference = item.get("reference", "?") if isinstance(item, dict) else item or "?"
        sentence = f"{reference}: {result.get('msg') or 'no reason given'}"
        lines = [line for line in str(result.get("stderr") or "").splitlines() if line.strip()]
        if lines and lines[-1].strip() not in sentence:
            sentence += f" ({lines[-1].strip()})"
        sentences.append(sentence)
    return sentences


def _running_line(host, container, entry):
    reference = str(entry.get("reference") or "?")
    image_id = str(entry.get("image_id") or "?")
    digests = [str(d) for d in entry.get("repo_digests") or []]
    line = f"{host}: {container} runs {reference} (image {image_id})"
    try:
        parts = image_reference(reference)
    except AnsibleFilterError:
        return line
    found = [d.rpartition("@")[2] for d in digests]
    if parts["pinned"]:
        if parts["digest"] not in found:
            listed = ", ".join(found) or "none"
            line += f"; its digests ({listed}) are not the pinned {parts['digest']}"
        return line
    if not found:
        return line + "; floating, and the image has no registry digest (a local build)"
    tagged = f"{parts['name']}:{parts['tag'] or 'latest'}"
    return line + f"; floating: {tagged}@{found[0]} pins what runs now"


def images_running(containers, host):
    """One line per container of the record a node keeps (``gpu_container_images``, the
    ``containers`` of ``/var/lib/llmfleet/images.json``): what it runs, and whether that is
    pinned."""
    if not isinstance(containers, dict):
        raise AnsibleFilterError(
            f"images_running: expected the containers of the record (a mapping); got {containers!r}"
        )
    return [
        _running_line(host, name, entry if isinstance(entry, dict) else {})
        for name, entry in sorted(containers.items())
    ]


# Names the engines write for one image: Docker Hub's, and Podman's local builds.
_HUB_PREFIXES = ("docker.io/", "index.docker.io/", "registry-1.docker.io/")
_LOCAL_PREFIX = "localhost/"
_NONE = "<none>"


def _repository_key(name):
    """A repository as the engines list it, so that Docker's and Podman's names compare:
    Docker Hub's ``docker.io/[library/]`` and Podman's ``localhost/`` (a local build) left
    out."""
    text = str(name)
    for prefix in _HUB_PREFIXES:
        if text.startswith(prefix):
            text = text[len(prefix) :]
            return text[len("library/") :] if text.startswith("library/") else text
    if text.startswith(_LOCAL_PREFIX):
        return text[len(_LOCAL_PREFIX) :]
    return text[len("library/") :] if text.startswith("library/") else text


def _split_name(name):
    """``(repository, tag)`` of a ``repository[:tag]`` (a registry's port is no tag)."""
    text = str(name)
    slash, colon = text.rfind("/"), text.rfind(":")
    return (text[:colon], text[colon + 1 :]) if colon > slash else (text, "")


def _listed_names(row):
    """``(image ID, [(repository, tag, digest)])`` of one image as ``docker images --format
    '{{json .}}'`` (a line: Repository, Tag, ID, Digest) or ``podman images --format json``
    (an image: Id, Names, Digest, RepoDigests) lists it; a part the engine does not know as
    ``""``, and no names for an image without a repository (``<none>``)."""
    if not isinstance(row, dict):
        raise AnsibleFilterError(
            "images_to_prune: each image is a mapping as docker images --format '{{json .}}'"
            f" (a line, parsed) or podman images --format json lists it; got {row!r}"
        )
    digest = str(row.get("Digest") or "")
    if "Repository" in row:  # Docker: one line per repository and tag
        names = [(str(row.get("Repository") or ""), str(row.get("Tag") or ""), digest)]
    else:  # Podman: one image, all its names
        tagged = row.get("Names") or row.get("RepoTags") or []
        names = [(*_split_name(name), digest) for name in tagged]
        for pinned in row.get("RepoDigests") or []:
            repository, _at, repo_digest = str(pinned).partition("@")
            names.append((repository, "", repo_digest))
    image = str(row.get("ID") or row.get("Id") or "")
    return image, [
        tuple("" if part == _NONE else part for part in name)
        for name in names
        if name[0] not in ("", _NONE)
    ]


def _kept(reference):
    """``(repository, tag, digest)`` of a reference to keep: a tag alone, or nothing, is the
    tag ``latest``; a digest alone keeps by digest only."""
    parts = image_reference(reference)
    tag = parts["tag"] or ("" if parts["digest"] else "latest")
    return _repository_key(parts["name"]), tag, parts["digest"]


def images_to_prune(listing, keep, repositories):
    """The IDs of the images of ``listing`` (what ``docker images --format '{{json .}}'``, a
    line each, or ``podman images --format json`` gives, parsed) that belong to
    ``repositories`` and to none other, and that no reference of ``keep`` names (by
    repository and tag, or by digest where it carries one): each once, in the listing's
    order. An image with no repository (``<none>``) is never one."""
    for what, value in (("listing", listing), ("keep", keep), ("repositories", repositories)):
        if value is not None and not isinstance(value, list):
            raise AnsibleFilterError(f"images_to_prune: {what} is a list; got {value!r}")
    kept = [_kept(ref) for ref in keep or []]
    kept_tags = {(repository, tag) for repository, tag, _digest in kept if tag}
    kept_digests = {digest for _repository, _tag, digest in kept if digest}
    scope = {_repository_key(image_reference(repo)["name"]) for repo in repositories or []}
    images = {}
    for row in listing or []:
        image, names = _listed_names(row)
        if image:
            images.setdefault(image, []).extend(names)
    prune = []
    for image, names in images.items():
        keys = [(_repository_key(repository), tag, digest) for repository, tag, digest in names]
        if not keys or any(repository not in scope for repository, _tag, _digest in keys):
            continue
        if any((r, t) in kept_tags or d in kept_digests for r, t, d in keys):
            continue
        prune.append(image)
    return prune


class FilterModule:
    """Container image filters."""

    def filters(self):
        return {
            "image_reference": image_reference,
            "image_reference_problems": image_reference_problems,
            "images_to_pull": images_to_pull,
            "images_to_check": images_to_check,
            "image_contents_problems": image_contents_problems,
            "contents_lacks": contents_lacks,
            "images_pull_failures": images_pull_failures,
            "images_running": images_running,
            "images_to_prune": images_to_prune,
        }
