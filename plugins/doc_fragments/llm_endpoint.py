# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""The options of the modules that talk to the served OpenAI-compatible endpoint."""

from __future__ import annotations


class ModuleDocFragment:
    # The argument spec is module_utils/_http/chat_client.py's ENDPOINT_OPTIONS.
    DOCUMENTATION = r"""
options:
  url:
    description:
      - Base URL of the server, V(http://host:port) or V(https://host:port), with an optional
        path prefix. C(/v1/chat/completions) is added to it; a trailing C(/v1) is dropped first.
    type: str
    required: true
  model:
    description:
      - Model name sent in every request (vLLM's C(--served-model-name)).
    type: str
    required: true
  api_key:
    description:
      - "Sent as C(Authorization: Bearer <api_key>). No header when empty."
      - When omitted, the environment variable E(LLMFLEET_API_KEY) of the node that runs the
        module is used.
    type: str
  request_timeout:
    description:
      - Seconds one request may take, from connecting to the last token. A request that takes
        longer counts as an error.
    type: float
    default: 600
  validate_certs:
    description:
      - Verify the server's TLS certificate and host name for V(https://) URLs.
    type: bool
    default: true
seealso:
  - name: OpenAI chat completions streaming
    description: The request and the chunks of the stream.
    link: https://platform.openai.com/docs/api-reference/chat/create
"""
