"""The SDK client for a module's `server` fixture (tests/helpers/server.py, module_server)."""

from __future__ import annotations

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from tests.helpers.demo import LangGraphDev


@pytest.fixture(scope="module")
def client(server: LangGraphDev) -> SyncLangGraphClient:
    return get_sync_client(url=server.url)
