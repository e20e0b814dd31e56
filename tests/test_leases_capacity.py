"""The service's pure parts: leases with the time passed in, and a switch's room and admission's fallbacks."""

from __future__ import annotations

import pytest

from controller import capacity
from controller.leases import Leases, NoLease, WrongSecret, hash_secret, new_secret


def test_a_lease_lives_while_renewed_and_only_its_secret_renews_it():
    leases = Leases()
    secret, digest = new_secret()
    assert digest == hash_secret(secret) and secret not in digest
    leases.hold("a", 3.0, digest, now=100.0)
    assert leases.remaining("a", 101.0) == 2.0 and leases.expired(102.9) == []
    assert leases.renew("a", secret, now=102.0) == 3.0
    assert leases.expired(104.9) == [] and [n for n, _ in leases.expired(105.0)] == ["a"]
    with pytest.raises(WrongSecret):
        leases.renew("a", secret + "x", now=103.0)
    with pytest.raises(NoLease):
        leases.renew("b", secret, now=103.0)
    leases.release("a")
    assert leases.remaining("a", 0.0) is None


def test_a_secret_is_hex_so_the_command_line_never_takes_it_for_an_option():
    """`ina-ctl job delete --secret S`: a base64url secret began with "-" about once in 64 jobs."""
    secret, _ = new_secret()
    assert len(secret) == 48 and int(secret, 16) >= 0 and not secret.startswith("-")


def test_a_restarted_service_gives_grace_before_the_first_renewal():
    leases = Leases()
    _, digest = new_secret()
    leases.hold("a", 2.0, digest, now=10.0, grace=9.0)
    assert leases.expired(18.9) == [] and [n for n, _ in leases.expired(19.0)] == ["a"]


def test_first_fit_and_what_is_free():
    taken = [(0, 64), (128, 64)]
    assert capacity.free_pool("s1", 64, 1024, taken) == 64
    assert capacity.free_pool("s1", 65, 1024, taken) == 192
    with pytest.raises(capacity.CapacityError, match="s1 has no 900 free consecutive slots"):
        capacity.free_pool("s1", 900, 1024, taken)
    assert capacity.free_cell("s1", 3, {0, 2}) == 1
    with pytest.raises(capacity.CapacityError, match="carries 2 trees already"):
        capacity.free_cell("s1", 2, {0, 1})
    room = capacity.room("s1", "tna", 1024, 8, taken, {0, 1})
    assert (room.free_slots, room.free_cells) == (1024 - 128, 6)


def test_admission_tries_fewer_trees_then_smaller_pools():
    assert list(capacity.fallbacks(3, 64)) == [(2, 64), (1, 64), (1, 32), (1, 16), (1, 8), (1, 4)]
    assert list(capacity.fallbacks(1, 6)) == []  # 3 slots would be below MIN_POOL
