"""Kubernetes' syntax for the names a job carries: labels, annotations, volumes, resources.

A job's names end up on a Kubernetes object when a Kubernetes executor runs it, so submission
holds them to the API server's own rules: a name it would refuse is refused here, naming the
field, instead of failing the job's run on the cluster. Patterns are matched whole
(fullmatch): "$" alone would accept a trailing newline.
"""

from __future__ import annotations

import re

# RFC 1123 labels: volume names, container names, namespaces, host names.
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
# RFC 1123 subdomains: dot-separated labels, at most 253 characters in all.
_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
DNS_SUBDOMAIN = re.compile(rf"(?=.{{1,253}}$){_SUBDOMAIN}", re.S)
# Qualified names (label and annotation keys, resource names, topology keys): an optional
# subdomain prefix and '/', then a name of at most 63 characters. The lookahead bounds the
# prefix before the subdomain pattern runs, so a 10 MB key fails at once.
QUALIFIED_NAME = re.compile(
    rf"((?=[-a-z0-9.]{{1,253}}/){_SUBDOMAIN}/)?[A-Za-z0-9]([-A-Za-z0-9_.]{{0,61}}[A-Za-z0-9])?"
)
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
# IANA service names (container port names): at most 15 characters, at least one letter.
PORT_NAME = re.compile(r"(?=.*[a-z])(?!.*--)[a-z0-9]([-a-z0-9]{0,13}[a-z0-9])?")
# Environment variable names: printable ASCII but '=' (Kubernetes 1.34 made this the rule).
ENV_NAME = re.compile(r"[ -<>-~]+")

KEY_RULE = (
    "an optional DNS subdomain prefix and '/', then a name of at most 63 letters, digits, "
    "'-', '_' and '.', starting and ending with a letter or digit"
)
LABEL_VALUE_RULE = (
    "at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
)
DNS_LABEL_RULE = (
    "at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit"
)


def is_label_key(key: str) -> bool:
    return QUALIFIED_NAME.fullmatch(key) is not None


def is_annotation_key(key: str) -> bool:
    """Kubernetes checks annotation keys in lower case: `Example.COM/Note` is a valid key."""
    match = QUALIFIED_NAME.fullmatch
    return match(key) is not None or match(key.lower()) is not None
