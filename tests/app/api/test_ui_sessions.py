"""/ui sessions: random ids mapped to scopes in memory, expiring, bounded in number."""

from neardup.app.api.ui.security import Sessions


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_sessions_map_random_ids_to_scopes_until_they_expire():
    clock = Clock()
    sessions = Sessions(lifetime=60, clock=clock)
    first = sessions.open(frozenset({"read"}))
    second = sessions.open(frozenset({"read", "write"}))
    assert first != second and len(first) >= 40
    assert sessions.scopes(first) == {"read"} and sessions.scopes(second) == {"read", "write"}
    assert sessions.scopes("read") is None and sessions.scopes("") is None
    sessions.close(first)
    assert sessions.scopes(first) is None
    clock.now += 61
    assert sessions.scopes(second) is None
    assert len(sessions) == 0


def test_sessions_keep_at_most_the_limit_dropping_the_oldest():
    sessions = Sessions(limit=3, clock=Clock())
    ids = [sessions.open(frozenset({"read"})) for _ in range(5)]
    assert len(sessions) == 3
    assert [sessions.scopes(i) is not None for i in ids] == [False, False, True, True, True]
