"""``AgentChannels``, an instance's set of open channels (one per sandbox): two
requests that find none open one each at once, and both use the one kept, never a
channel the other closed under them."""

from __future__ import annotations

import threading
from typing import cast

from runtime.providers.agent.channel import AgentChannel
from runtime.providers.agent.channels import AgentChannels


class Opened:
    """What ``AgentChannels`` uses of a channel: whether it is closed, and closing it."""

    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_two_requests_opening_at_once_share_one_channel_and_close_the_spare() -> None:
    both_opening = threading.Barrier(2)
    opened: list[Opened] = []

    def open_channel(_: str) -> AgentChannel:
        channel = Opened()
        opened.append(channel)
        both_opening.wait(5)  # each request opens its own before either registers it
        return cast(AgentChannel, channel)

    channels = AgentChannels(open_channel)
    got: list[AgentChannel | None] = []
    requests = [threading.Thread(target=lambda: got.append(channels.get("sb"))) for _ in "ab"]
    for request in requests:
        request.start()
    for request in requests:
        request.join(10)

    assert len(opened) == 2 and got[0] is got[1]
    kept = cast(Opened, got[0])
    assert not kept.closed  # the channel both requests use stays open
    assert [channel.closed for channel in opened if channel is not kept] == [True]
    assert channels.get("sb") is got[0]


def test_a_closed_channel_is_replaced() -> None:
    opened: list[Opened] = []

    def open_channel(_: str) -> AgentChannel:
        opened.append(Opened())
        return cast(AgentChannel, opened[-1])

    channels = AgentChannels(open_channel)
    first = channels.get("sb")
    cast(Opened, first).close()
    second = channels.get("sb")
    assert second is not first and not cast(Opened, second).closed
