"""memo.config_cache: hashable arguments are cached, unhashable ones bypass the cache, and a
TypeError raised by the function itself propagates after a single call."""

from __future__ import annotations

import pytest

from simengine.memo import config_cache


def test_hashable_arguments_are_computed_once():
    calls = []

    def f(x, y):
        calls.append((x, y))
        return x + y

    g = config_cache(f)
    assert g(1, 2) == g(1, 2) == 3
    assert calls == [(1, 2)]


def test_unhashable_arguments_run_the_function_every_time():
    calls = []

    def f(xs):
        calls.append(list(xs))
        return sum(xs)

    g = config_cache(f)
    assert g([1, 2]) == g([1, 2]) == 3
    assert calls == [[1, 2], [1, 2]]


def test_a_type_error_from_the_function_propagates_after_one_call():
    calls = []

    def f(x):
        calls.append(x)
        raise TypeError("from f")

    g = config_cache(f)
    with pytest.raises(TypeError, match="from f"):
        g(1)
    assert calls == [1]
