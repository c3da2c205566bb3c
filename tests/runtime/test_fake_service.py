"""The fake external service behaves like the outside world the effect ledger must survive.

Plain pytest, no database. Nothing sleeps: tests wait on the service's own conditions.
"""

import re
import signal
import subprocess
import sys
import threading
import urllib.parse

import pytest

from console.dev.demo.fake_service import FakeService, ServiceRejected, call, http_json

JOIN = 10.0  # generous upper bound for a thread that should finish promptly


@pytest.fixture
def fake():
    with FakeService() as service:
        yield service


class Background:
    """Runs one client call on a thread and keeps its result or exception."""

    def __init__(self, fn, *args, **kwargs):
        self.result = self.error = None
        self.thread = threading.Thread(target=self._run, args=(fn, args, kwargs), daemon=True)
        self.thread.start()

    def _run(self, fn, args, kwargs):
        try:
            self.result = fn(*args, **kwargs)
        except BaseException as exc:  # surfaced to the test, not lost in the thread
            self.error = exc

    def join(self):
        self.thread.join(JOIN)
        assert not self.thread.is_alive(), "client call did not finish"
        return self


def test_keyed_mode_deduplicates_by_key(fake):
    first = call(fake.url, {"score": 1}, key="k1", worker="w1")
    second = call(fake.url, {"score": 1}, key="k1", worker="w2")
    assert first["deduplicated"] is False
    assert second == {"op_id": first["op_id"], "key": "k1", "deduplicated": True}
    assert fake.performed_count() == 1
    assert fake.performed_by_key() == {"k1": 1}
    calls = fake.calls()
    assert [c["outcome"] for c in calls] == ["performed", "deduplicated"]
    assert [c["worker"] for c in calls] == ["w1", "w2"]
    assert calls[0]["body"] == {"score": 1}


def test_unkeyed_mode_performs_every_call(fake):
    fake.set_mode("unkeyed")
    first = call(fake.url, {}, key="k1")
    second = call(fake.url, {}, key="k1")
    assert first["op_id"] != second["op_id"]
    assert not second["deduplicated"]
    assert fake.performed_count() == 2
    assert fake.performed_by_key() == {"k1": 2}


def test_missing_key_in_keyed_mode_is_rejected(fake):
    with pytest.raises(ServiceRejected) as info:
        call(fake.url, {"x": 1})
    assert info.value.status == 400
    assert info.value.body == {"error": "KEY_REQUIRED"}
    assert fake.performed_count() == 0
    assert fake.calls()[0]["key"] is None


def test_fail_answers_503_and_performs_nothing(fake):
    fake.push("fail")
    with pytest.raises(ServiceRejected) as info:
        call(fake.url, {}, key="k1")
    assert info.value.status == 503
    assert fake.performed_count() == 0
    # The FIFO held one behaviour: the retry with the same key goes through.
    assert call(fake.url, {}, key="k1")["deduplicated"] is False
    assert fake.performed_by_key() == {"k1": 1}


def test_drop_performs_but_loses_the_receipt(fake):
    fake.push("drop")
    with pytest.raises(ConnectionError):  # outcome unknown to the client...
        call(fake.url, {}, key="k1")
    assert fake.performed_count() == 1  # ...but the operation happened
    status, op = http_json("GET", fake.url + "/_ops/k1")
    assert status == 200 and op["times_performed"] == 1
    # Reconciling by retrying with the same key is safe in keyed mode.
    assert call(fake.url, {}, key="k1") == {"op_id": op["op_id"], "key": "k1", "deduplicated": True}


def test_drop_every_n_performs_calls_1_n_plus_1_and_so_on_but_loses_their_receipts():
    with FakeService(mode="unkeyed", drop_every=3) as service:
        dropped = []
        for n in range(1, 8):
            try:
                call(service.url, {"n": n}, key=f"k{n}")
            except ConnectionError:
                dropped.append(n)
        assert dropped == [1, 4, 7]
        assert service.performed_count() == 7  # a dropped call was performed all the same
        assert [c["behaviour"] for c in service.calls()] == ["drop", None, None] * 2 + ["drop"]


def test_a_queued_behaviour_takes_the_place_of_the_standing_drop():
    with FakeService(mode="unkeyed", drop_every=1) as service:
        service.push("fail")
        with pytest.raises(ServiceRejected):
            call(service.url, {}, key="k")
        with pytest.raises(ConnectionError):
            call(service.url, {}, key="k")
        assert service.performed_count() == 1


@pytest.mark.parametrize("every", [0, -1, 1.5, True])
def test_drop_every_must_be_a_positive_integer(every):
    with pytest.raises(ValueError):
        FakeService(drop_every=every)


@pytest.mark.process
def test_the_standalone_server_drops_what_drop_every_says():
    """As `make run` starts the demo's notification service (console/dev/run.py)."""
    with subprocess.Popen(
        [
            sys.executable,
            "-m",
            "console.dev.demo.fake_service",
            "--port",
            "0",
            "--mode",
            "unkeyed",
            "--drop-every",
            "2",
        ],
        stdout=subprocess.PIPE,
        text=True,
    ) as server:
        try:
            banner = server.stdout.readline()
            url = re.search(r"listening on (http://\S+)", banner).group(1)
            assert "dropping calls 1, 3, ..." in banner
            with pytest.raises(ConnectionError):
                call(url, {}, key="first")
            assert call(url, {}, key="second")["deduplicated"] is False
            with pytest.raises(ConnectionError):
                call(url, {}, key="third")
        finally:
            server.send_signal(signal.SIGTERM)
            assert server.wait(JOIN) == 0


@pytest.mark.process
@pytest.mark.parametrize("every", ["0", "-2", "often"])
def test_the_standalone_server_refuses_a_drop_every_that_is_not_positive(every):
    ran = subprocess.run(
        [sys.executable, "-m", "console.dev.demo.fake_service", "--drop-every", every],
        capture_output=True,
        text=True,
        timeout=JOIN,
    )
    assert ran.returncode == 2
    assert "--drop-every: must be a positive integer" in ran.stderr


def test_hang_performs_then_blocks_until_released(fake):
    fake.push("hang")
    client = Background(call, fake.url, {}, key="k1")
    assert fake.wait_for_hung(1, JOIN)
    assert fake.performed_count() == 1  # done by the service, not yet known to the client
    assert client.thread.is_alive() and client.result is None
    assert fake.active == 1
    assert fake.release() == 1
    client.join()
    assert client.error is None
    assert client.result["key"] == "k1" and client.result["deduplicated"] is False
    assert fake.calls()[0]["answered"] is True


def test_hang_before_blocks_before_performing(fake):
    client = Background(call, fake.url, {}, key="k1", behaviour="hang_before")  # per-request header
    assert fake.wait_for_hung(1, JOIN)
    assert fake.performed_count() == 0
    fake.release()
    client.join()
    assert client.result["deduplicated"] is False
    assert fake.performed_count() == 1


def test_client_timeout_on_a_hang_is_an_unknown_outcome(fake):
    fake.push("hang")
    with pytest.raises(TimeoutError):  # propagated as is, not as ServiceRejected
        call(fake.url, {}, key="k1", timeout=0.2)
    assert fake.performed_count() == 1
    fake.release()


def test_peak_active_counts_concurrent_hung_requests(fake):
    n = 5
    fake.push(*["hang"] * n)
    barrier = threading.Barrier(n)

    def client(i):
        barrier.wait(JOIN)
        return call(fake.url, {"i": i}, key=f"k{i}")

    clients = [Background(client, i) for i in range(n)]
    assert fake.wait_for_hung(n, JOIN)
    assert fake.peak_active == n and fake.active == n
    status, waited = http_json("GET", fake.url + f"/_wait?hung={n}&timeout=5")
    assert status == 200 and waited["hung"] == n
    assert fake.release(count=2) == 2
    assert fake.release() == n - 2
    results = [c.join().result for c in clients]
    assert sorted(r["key"] for r in results) == [f"k{i}" for i in range(n)]
    assert len({r["op_id"] for r in results}) == n
    assert fake.peak_active == n


def test_wait_endpoint_returns_when_calls_arrive(fake):
    waiter = Background(http_json, "GET", fake.url + "/_wait?calls=2&timeout=10")
    call(fake.url, {}, key="a")
    call(fake.url, {}, key="b")
    status, body = waiter.join().result
    assert status == 200 and body["ok"] is True and body["calls"] == 2


def test_wait_endpoint_times_out_with_408(fake):
    status, body = http_json("GET", fake.url + "/_wait?calls=1&timeout=0.1")
    assert status == 408 and body["ok"] is False


def test_http_control_endpoints(fake):
    status, body = http_json("POST", fake.url + "/_control", {"mode": "unkeyed", "next": ["fail"]})
    assert status == 200 and body == {"mode": "unkeyed", "pending": ["fail"]}
    with pytest.raises(ServiceRejected):
        call(fake.url, {}, key="k")
    call(fake.url, {}, key="k")
    call(fake.url, {}, key="k")
    status, snap = http_json("GET", fake.url + "/_calls")
    assert status == 200
    assert (snap["performed"], snap["mode"], len(snap["calls"])) == (2, "unkeyed", 3)
    assert http_json("GET", fake.url + "/_ops/" + urllib.parse.quote("no such key"))[0] == 404
    assert http_json("POST", fake.url + "/_control", {"next": ["explode"]})[0] == 400


def test_release_endpoint_releases_oldest_first(fake):
    fake.push("hang", "hang")
    first = Background(call, fake.url, {}, key="first")
    assert fake.wait_for_hung(1, JOIN)
    second = Background(call, fake.url, {}, key="second")
    assert fake.wait_for_hung(2, JOIN)
    assert http_json("POST", fake.url + "/_release", {"count": 1}) == (200, {"released": 1})
    assert first.join().result["key"] == "first"
    assert second.thread.is_alive()
    assert http_json("POST", fake.url + "/_release", {}) == (200, {"released": 1})
    assert second.join().result["key"] == "second"


def test_reset_clears_everything_and_releases_hung_requests(fake):
    call(fake.url, {}, key="k1")
    fake.push("hang")
    client = Background(call, fake.url, {}, key="k2")
    assert fake.wait_for_hung(1, JOIN)
    fake.push("fail")
    fake.reset()
    client.join()
    assert client.result["key"] == "k2"  # released, answered normally
    assert fake.calls() == [] and fake.performed_count() == 0 and fake.performed_by_key() == {}
    assert fake.active == 0
    # The queued "fail" was cleared, and k1 is no longer known: it performs afresh.
    assert call(fake.url, {}, key="k1")["deduplicated"] is False
    assert fake.peak_active == 1
    fake.reset()  # nothing in flight now: the peak starts again from zero
    assert fake.peak_active == 0


def test_stop_releases_a_hung_request():
    service = FakeService().start()
    service.push("hang")
    client = Background(call, service.url, {}, key="k1")
    assert service.wait_for_hung(1, JOIN)
    service.stop()
    client.join()
    assert client.error is None and client.result["key"] == "k1"
