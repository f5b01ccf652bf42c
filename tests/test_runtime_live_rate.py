"""runtime.live_rate.LiveRate: the reply's decode rate from the engine's token count."""

from rooflight.runtime.live_rate import LiveRate


class _Counted:
    """Only what LiveRate reads of an Engine: the tokens its context holds."""

    def __init__(self) -> None:
        self.tokens_evaluated: int | None = 100


def test_rate_is_tokens_since_the_first_over_time_since_and_throttled():
    engine, now = _Counted(), [10.0]
    live = LiveRate(engine, every_s=0.25, clock=lambda: now[0])
    assert live.tick() == (1, None)  # first token: started, no rate yet
    engine.tokens_evaluated, now[0] = 105, 10.1
    assert live.tick() is None  # too soon for a new figure
    engine.tokens_evaluated, now[0] = 110, 10.5
    tokens, rate = live.tick()
    assert tokens == 11 and abs(rate - 20.0) < 1e-9
    engine.tokens_evaluated = None  # closed under the reply
    now[0] = 11.0
    assert live.tick() is None
