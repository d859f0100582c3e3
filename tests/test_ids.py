"""Ids: UUIDv7, increasing within a process even within one millisecond; request ids."""

from __future__ import annotations

import os
import re

from units_api.ids import new_request_id, uuid7


def test_uuid7_ids_increase_and_are_version_7() -> None:
    ids = [uuid7() for _ in range(20_000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert {value.version for value in ids} == {7}
    assert {value.variant for value in ids} == {"specified in RFC 4122"}


def test_a_forked_process_makes_ids_of_its_own() -> None:
    """Random bits are read from the system in blocks; a child forked mid-block must not
    reuse the parent's."""
    uuid7()  # a block is being used
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.write(write, b"".join(uuid7().bytes for _ in range(100)))
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(read, 1600)
    os.close(read)
    os.close(write)
    ours = [uuid7().bytes for _ in range(100)]
    theirs = [child[index : index + 16] for index in range(0, 1600, 16)]
    # The low 62 bits are random in each: none may repeat between the two processes.
    assert not {value[8:] for value in ours} & {value[8:] for value in theirs}


def test_request_ids_are_random_hex_of_their_own_in_a_forked_process() -> None:
    ours = [new_request_id() for _ in range(10_000)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", value) for value in ours)
    assert len(set(ours)) == len(ours)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child, forked mid-block
        os.write(write, "".join(new_request_id() for _ in range(100)).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(read, 3200).decode()
    os.close(read)
    os.close(write)
    theirs = {child[index : index + 32] for index in range(0, 3200, 32)}
    assert len(theirs) == 100
    assert not theirs & {new_request_id() for _ in range(100)}
