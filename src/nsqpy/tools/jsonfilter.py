"""nsq_to_nsq's JSON filters: ``--require-json-field`` (with
``--require-json-value``) lets a message through, ``--whitelist-json-field``
keeps only those keys. As NSQ: a body that is not a JSON object is dropped
(and worth an error line), and a required value with its field missing
backs the consumer off."""

import enum
import json


class Verdict(enum.Enum):
    PASS = "pass"
    DROP = "drop"  # FIN without publishing
    INVALID = "invalid"  # FIN without publishing: not a JSON object, which the operator should hear of
    BACKOFF = "backoff"  # REQ: the message lacks what the filter needs


class JsonFilter:
    def __init__(self, require_field: str = "", require_value: str = "", whitelist: list[str] = ()):
        self.require_field = require_field
        self.require_value = require_value
        self.whitelist = list(whitelist)
        try:
            self._number = float(require_value)
        except ValueError:
            self._number = None

    @property
    def active(self) -> bool:
        return bool(self.require_field or self.whitelist)

    def apply(self, body: bytes) -> tuple[Verdict, bytes, str]:
        """-> (verdict, the body to publish, why when not PASS)."""
        try:
            document = json.loads(body)
        except ValueError:
            document = None
        if not isinstance(document, dict):
            return Verdict.INVALID, body, "not a JSON object"
        verdict, why = self._check(document)
        if verdict is not Verdict.PASS or not self.whitelist:
            return verdict, body, why
        kept = {key: document[key] for key in self.whitelist if key in document}
        return Verdict.PASS, json.dumps(kept, separators=(",", ":"), sort_keys=True,
                                        ensure_ascii=False).encode(), ""

    def _check(self, document: dict) -> tuple[Verdict, str]:
        if not self.require_field:
            return Verdict.PASS, ""
        if self.require_field not in document:
            if self.require_value:
                return Verdict.BACKOFF, f"missing field {self.require_field!r} to check required value"
            return Verdict.DROP, f"no field {self.require_field!r}"
        if not self.require_value:
            return Verdict.PASS, ""
        value = document[self.require_field]
        if isinstance(value, str):
            matches = value == self.require_value
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and self._number is not None:
            matches = float(value) == self._number
        else:
            matches = False
        return (Verdict.PASS, "") if matches else (Verdict.DROP, f"{self.require_field} is not {self.require_value}")
