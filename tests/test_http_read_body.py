"""limits.read_body: a body complete in its first message is taken without a deadline timer; anything
that must wait is read under the deadline, with the same size cap, budget and disconnect handling."""

import asyncio

import pytest
from posenc.http.pipeline.budget import MemoryBudget
from posenc.http.api.errors import HttpError
from posenc.http.pipeline.limits import ClientGone, read_body, started

SCOPE = {"headers": [(b"content-type", b"application/json")]}


def _message(body: bytes, more: bool = False) -> dict:
    return {"type": "http.request", "body": body, "more_body": more}


def _receiver(*steps):
    """A receive coroutine function: each step is a message (returned at once), a delay in seconds
    before the next message, or None (wait forever)."""
    pending = list(steps)

    async def receive():
        while True:
            step = pending.pop(0)
            if step is None:
                await asyncio.Event().wait()
            elif isinstance(step, float):
                await asyncio.sleep(step)
            else:
                return step

    return receive


def _read(receive, *, max_bytes=1000, timeout_s=0.2, budget=None, scope=SCOPE):
    budget = budget or MemoryBudget(1 << 20)

    async def main():
        reservation = budget.take(0, "the request body")
        try:
            return await read_body(scope, receive, max_bytes, timeout_s, reservation), reservation.nbytes
        finally:
            reservation.release()

    return asyncio.run(main())


def test_a_body_complete_in_its_first_message_arms_no_timer():
    async def main():
        loop = asyncio.get_running_loop()
        armed = []
        real = loop.call_at
        loop.call_at = lambda *args, **kwargs: armed.append(args) or real(*args, **kwargs)
        reservation = MemoryBudget(1 << 20).take(0, "the request body")
        body = await read_body(SCOPE, _receiver(_message(b'{"a": 1}')), 1000, 0.2, reservation)
        return body, reservation.nbytes, armed

    body, charged, armed = asyncio.run(main())
    assert body == b'{"a": 1}' and charged == 8 and armed == []


def test_a_first_message_with_more_to_come_is_joined_with_the_rest():
    # the regression: a first message that arrived at once but said more_body ended the body there
    body, charged = _read(_receiver(_message(b"ab", True), _message(b"cd", True), 0.01, _message(b"e")))
    assert body == b"abcde" and charged == 5


def test_a_first_receive_that_waits_is_carried_on_and_then_read():
    assert _read(_receiver(0.01, _message(b"xy", True), 0.01, _message(b"z"))) == (b"xyz", 3)


def test_a_receive_returning_a_future_is_awaited():
    async def main():
        future = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.01, future.set_result, _message(b"late"))
        reservation = MemoryBudget(100).take(0, "the request body")
        return await read_body(SCOPE, lambda: future, 1000, 0.5, reservation)

    assert asyncio.run(main()) == b"late"


@pytest.mark.parametrize("steps", [(None,), (_message(b"ab", True), None), (0.01, _message(b"a", True), None)])
def test_a_body_that_stops_arriving_is_refused_at_the_deadline(steps):
    with pytest.raises(HttpError) as caught:
        _read(_receiver(*steps), timeout_s=0.05)
    assert caught.value.status == 408 and caught.value.field == "body"
    assert caught.value.headers["connection"] == "close"


def test_cancelling_the_request_while_it_waits_is_not_a_timeout():
    async def main():
        reservation = MemoryBudget(100).take(0, "the request body")
        task = asyncio.ensure_future(read_body(SCOPE, _receiver(None), 1000, 10.0, reservation))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


@pytest.mark.parametrize("steps", [({"type": "http.disconnect"},), (0.01, {"type": "http.disconnect"}),
                                   (_message(b"a", True), {"type": "http.disconnect"})])
def test_a_client_that_leaves_is_gone(steps):
    with pytest.raises(ClientGone):
        _read(_receiver(*steps))


@pytest.mark.parametrize("steps", [(_message(b"x" * 11),), (_message(b"x" * 6, True), _message(b"x" * 5)),
                                   (0.01, _message(b"x" * 11))])
def test_a_body_over_the_cap_is_413(steps):
    with pytest.raises(HttpError) as caught:
        _read(_receiver(*steps), max_bytes=10)
    assert caught.value.status == 413 and caught.value.code == "body_too_large"


def test_a_declared_length_over_the_cap_is_refused_before_reading():
    scope = {"headers": [(b"content-length", b"11")]}
    with pytest.raises(HttpError) as caught:
        _read(_receiver(), max_bytes=10, scope=scope)  # no step: a receive would fail the test
    assert caught.value.status == 413


@pytest.mark.parametrize("steps", [(_message(b"x" * 20),), (_message(b"x" * 8, True), _message(b"x" * 8))])
def test_a_body_over_the_budget_is_503_and_closes(steps):
    budget = MemoryBudget(10)
    with pytest.raises(HttpError) as caught:
        _read(_receiver(*steps), budget=budget)
    assert caught.value.status == 503 and caught.value.headers["connection"] == "close"
    assert budget.held == 0


def test_started_returns_a_finished_coroutines_value_and_carries_on_a_waiting_one():
    async def ready():
        return 7

    async def waiting():
        await asyncio.sleep(0.01)
        return 8

    async def main():
        assert started(ready()) == 7
        rest = started(waiting())
        assert not isinstance(rest, int)
        return await rest

    assert asyncio.run(main()) == 8
