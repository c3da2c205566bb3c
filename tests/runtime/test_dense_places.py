"""A dense worker's places (runtime/worker/dense.py Places), in-process: a wake-up that
finds every place taken is remembered, never lost, and a place given back by abandon()
is not given back twice."""

from __future__ import annotations

import threading

from runtime.worker.dense import Places


def _in_thread(fn):
    result = []
    thread = threading.Thread(target=lambda: result.append(fn()))
    thread.start()
    thread.join(5)
    return result[0]


def test_a_full_process_remembers_the_pool_and_the_next_freed_place_takes_it():
    places = Places(2)
    assert places.take_or_want("a") and places.take_or_want("b")
    assert not places.take_or_want("c")  # full: no claim, but "c" is remembered
    assert not places.take_or_want("c")  # once
    assert places.taken == 2

    assert _in_thread(places.next_or_free) == "c"  # the place is kept for "c"
    assert places.taken == 2
    assert _in_thread(places.next_or_free) is None  # nothing waits: freed
    assert places.taken == 1


def test_an_abandoned_place_is_freed_once():
    places = Places(1)
    assert places.take_or_want("a")
    ident: list[int] = []
    release = threading.Event()

    def stuck():
        ident.append(threading.get_ident())
        release.wait(5)
        places.free()  # the abandoned thread ends at last: frees nothing more

    thread = threading.Thread(target=stuck)
    thread.start()
    while not ident:
        pass
    places.abandon(ident[0])
    assert places.taken == 0 and places.take_or_want("b")  # its place went to the next task
    release.set()
    thread.join(5)
    assert places.taken == 1
    assert not places.join(timeout=0.05)
    places.free()
    assert places.join(timeout=1)
