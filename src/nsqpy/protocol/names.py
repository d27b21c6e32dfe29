"""Topic and channel name rules (the same for nsqd and nsqlookupd)."""

import re

EPHEMERAL_SUFFIX = "#ephemeral"
MAX_NAME_LENGTH = 64

_NAME = re.compile(r"[.a-zA-Z0-9_-]+(#ephemeral)?")
RULE = "1-64 characters of [.a-zA-Z0-9_-], optionally ending in #ephemeral"


def is_valid_name(name: str) -> bool:
    """True for a legal topic or channel name: 1..64 chars of ``[.a-zA-Z0-9_-]``,
    optionally ending in ``#ephemeral`` (which counts towards the length)."""
    return 0 < len(name) <= MAX_NAME_LENGTH and _NAME.fullmatch(name) is not None


# Topics and channels follow one rule; two names keep call sites readable.
is_valid_topic_name = is_valid_name
is_valid_channel_name = is_valid_name


def is_ephemeral(name: str) -> bool:
    return name.endswith(EPHEMERAL_SUFFIX)


def check_name(kind: str, name) -> None:
    """Raise ValueError naming ``name`` and the rule, unless it is a legal
    ``kind`` ("topic", "channel") name: go-nsq checks before sending, as
    a name nsqd cannot parse is read as another (``"bad topic"`` as
    ``bad``) or as a body size."""
    if not isinstance(name, str) or not is_valid_name(name):
        raise ValueError(f"invalid {kind} name {name!r}: {RULE}")
