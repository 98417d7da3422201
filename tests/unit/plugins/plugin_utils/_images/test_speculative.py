"""plugin_utils/_images/speculative: the method read back from rendered options, MTP methods."""

from __future__ import annotations

from ansible_collections.llmfleet.cluster.plugins.plugin_utils._images.speculative import (
    is_mtp,
    method_of,
    rendered,
)


def test_the_method_is_read_back_from_the_rendered_option() -> None:
    assert method_of({"speculative-config": rendered({"method": "ngram"})}) == "ngram"
    assert method_of({"speculative-config": {"method": "suffix"}}) == "suffix"
    assert method_of({}) is None
    assert method_of(None) is None
    assert method_of({"speculative-config": "{not json"}) is None
    assert method_of({"speculative-config": "[1]"}) is None


def test_mtp_methods_are_mtp_and_its_own_kind() -> None:
    assert is_mtp("mtp") and is_mtp("deepseek_mtp") and is_mtp("qwen3_next_mtp")
    assert not is_mtp("ngram") and not is_mtp("eagle3") and not is_mtp(None)
