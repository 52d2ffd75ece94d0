"""Runs the state machine of ``machine.py`` against the unit tests' queue (the real adapter on
fakeredis) with the in-memory repository, at half the profile's examples: the queue's scripts are
the same as in ``test_queue_machine.py``, only the repository differs."""

from __future__ import annotations

import pytest
from hypothesis import settings

from tests.property.machine import QueueMachine

pytestmark = [pytest.mark.timeout(900), pytest.mark.long(130)]

TestInMemoryAdapters = QueueMachine.TestCase
# Both machines run the real queue scripts (the unit tests' queue is RedisTaskQueue on fakeredis)
# and differ only in the repository, so this one runs half the examples: it took 371 s under load
# at the profile's 200, as long as the one on SQLite.
_profile = settings()  # the loaded profile (ci: 200 examples)
TestInMemoryAdapters.settings = settings(_profile, max_examples=max(1, _profile.max_examples // 2))
