"""JSON as every `threadlog` command prints it: the exact text, with nothing a terminal
would obey.

Contract: `dumps(value, indent=None)` is `json.dumps(value, ensure_ascii=False,
default=str)` with every C1 control and bidi override or isolate written as its
`\\uXXXX` escape; the text parses to the same value.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["dumps"]

_UNSAFE = re.compile("[\u0080-\u009f\u202a-\u202e\u2066-\u2069]")


def dumps(value: Any, indent: int | None = None) -> str:
    text = json.dumps(value, ensure_ascii=False, indent=indent, default=str)
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
