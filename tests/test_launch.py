"""The launch helpers' autotune pick cache (:class:`kernels.launch.TunedPicks`)."""

from kernels.launch import TunedPicks


def test_tuned_picks_name_only_the_launches_since_clear():
    """A kept pick is reused by key; ``last`` names the latest pick of each kernel made or
    reused since ``clear_last``, so a row names its own case's picks and no earlier case's."""
    picks = TunedPicks()
    assert picks.get("fwd", (10, 0)) is None and picks.last() == {}   # a miss is no pick
    picks.put("fwd", (10, 0), (1024, 4))
    picks.put("bwd", (10, 0), (2048, 8))
    assert picks.last() == {"fwd": (1024, 4), "bwd": (2048, 8)}
    picks.clear_last()
    assert picks.last() == {}
    assert picks.get("fwd", (10, 0)) == (1024, 4)                     # kept across clear_last
    assert picks.get("fwd", (12, 0)) is None
    assert picks.last() == {"fwd": (1024, 4)}
    picks.put("fwd", (12, 0), (4096, 8))
    assert picks.last() == {"fwd": (4096, 8)} and picks.get("fwd", (10, 0)) == (1024, 4)
