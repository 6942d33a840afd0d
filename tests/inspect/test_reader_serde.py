"""The reader's serializer decodes a large blob once per read (`inspect.readonly`)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from threadlog.checkpoint.serde import strict_serializer
from threadlog.inspect.readonly import LARGE, remember_large


class Counting:
    def __init__(self) -> None:
        self.inner = strict_serializer()
        self.loads = 0

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        self.loads += 1
        return self.inner.loads_typed(data)


def test_a_large_checkpoint_is_decoded_once_and_each_reader_gets_its_own_dicts() -> None:
    checkpoint = {"channel_values": {"messages": [HumanMessage("x" * 1000, id=str(i))
                                                   for i in range(400)]}, "id": "c"}
    blob = strict_serializer().dumps_typed(checkpoint)
    assert len(blob[1]) >= LARGE
    counting = Counting()
    serde = remember_large(counting)

    a = serde.loads_typed(blob)
    b = serde.loads_typed((blob[0], bytes(blob[1])))  # the same bytes, read again
    assert counting.loads == 1 and a == b == checkpoint
    a["channel_values"]["messages"] = []  # one reader's change is not another's
    assert len(serde.loads_typed(blob)["channel_values"]["messages"]) == 400
    other = strict_serializer().dumps_typed({**checkpoint, "id": "d"})
    assert serde.loads_typed(other)["id"] == "d" and counting.loads == 2
    small = strict_serializer().dumps_typed({"id": "s"})
    serde.loads_typed(small), serde.loads_typed(small)
    assert counting.loads == 4  # small blobs are not remembered
    with pytest.raises(TypeError, match="does not write"):
        serde.dumps_typed(checkpoint)
