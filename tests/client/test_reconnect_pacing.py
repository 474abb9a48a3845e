"""Reconnect pacing of the event stream under a long outage."""

from __future__ import annotations

import grpc

from armada_core.client.errors import ArmadaError
from armada_core.client.watching import Reconnector, WatchOptions


def test_reconnect_delay_stays_at_its_maximum_through_a_long_outage() -> None:
    options = WatchOptions(reconnect_delay=0.5, max_reconnect_delay=5.0)
    reconnector = Reconnector(options)
    error = ArmadaError("server down", code=grpc.StatusCode.UNAVAILABLE)
    delays = [reconnector.failed(error) for _ in range(2000)]
    assert delays[:4] == [0.5, 1.0, 2.0, 4.0]
    assert set(delays[4:]) == {5.0}
