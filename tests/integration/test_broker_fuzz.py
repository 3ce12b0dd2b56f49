"""Hypothesis fuzzing of a live broker over TCP (the CI-sized run; benchmarks/fuzz.py soaks).

Each input is sent on a fresh connection and followed by a probe (an
ApiVersions v0 request) on the same connection; `tests.fuzz.hostile.exchange`
checks that the broker answers with a response of the right shape or closes
that connection. Inputs (see tests/fuzz/hostile.py), for every API and version
the broker advertises:

* random frames and random unframed bytes;
* structurally valid requests built from kio's schemas with hostile values
  (negative and extreme integers, illegal and duplicate topic names,
  out-of-range partitions, corrupt record batches, zero and negative waits);
* those requests mutated (hostile length fields, truncation, bit flips, growth);
* one length field replaced by a count far larger than the frame;
* null where the schema forbids it;
* unknown tagged fields (valid: they must be answered);
* the body of one version under the header of another.

After the run the broker is alive, has no tracebacks in its log, stays under a
memory bound, kept the records it had, and serves normal clients. Seeds are
fixed (derandomize), so CI runs the same ~4,800 cases every time.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slog.core.names import parse_partition_dir_name
from tests.brokers import running_broker
from tests.compat.clients import kcat_metadata
from tests.fuzz.hostile import (
    API_CASES,
    SETTINGS,
    TARGET_CONFIG,
    Target,
    assert_unharmed,
    exchange,
    huge_declared_lengths,
    mismatched_versions,
    mutated_requests,
    nulls_where_not_nullable,
    prepare_target,
    random_frames,
    requests,
    unknown_tagged_fields,
)


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    with running_broker(tmp_path_factory.mktemp("fuzz") / "data", **TARGET_CONFIG) as broker:
        yield prepare_target(broker)


def test_every_advertised_api_is_fuzzed(target: Target) -> None:
    """The cases come from the same table the live broker advertises (new APIs included)."""
    advertised = {(key, v) for key, (lo, hi) in target.advertised.items()
                  for v in range(lo, hi + 1)}
    assert set(API_CASES) == advertised


@settings(max_examples=700, **SETTINGS)
@given(frame=random_frames())
def test_random_frames(target: Target, frame: bytes) -> None:
    exchange(target, frame)


@settings(max_examples=200, **SETTINGS)
@given(raw=st.binary(min_size=1, max_size=64))
def test_random_unframed_bytes(target: Target, raw: bytes) -> None:
    exchange(target, raw, framed=False)


@settings(max_examples=1500, **SETTINGS)
@given(sent=requests())
def test_hostile_valid_requests(target: Target, sent: bytes) -> None:
    exchange(target, sent)


@settings(max_examples=1200, **SETTINGS)
@given(sent=mutated_requests())
def test_mutated_requests(target: Target, sent: bytes) -> None:
    exchange(target, sent)


@settings(max_examples=300, **SETTINGS)
@given(sent=huge_declared_lengths())
def test_declared_lengths_beyond_the_frame(target: Target, sent: bytes) -> None:
    exchange(target, sent)


@settings(max_examples=300, **SETTINGS)
@given(sent=nulls_where_not_nullable())
def test_null_where_not_nullable(target: Target, sent: bytes) -> None:
    exchange(target, sent)


@settings(max_examples=300, **SETTINGS)
@given(sent=unknown_tagged_fields())
def test_unknown_tagged_fields_are_answered(target: Target, sent: bytes) -> None:
    # These are valid requests: exchange() fails if the connection is closed on them.
    exchange(target, sent)


@settings(max_examples=300, **SETTINGS)
@given(sent=mismatched_versions())
def test_body_of_one_version_under_another_header(target: Target, sent: bytes) -> None:
    exchange(target, sent)


def test_pipelined_garbage_after_a_valid_request(target: Target) -> None:
    """A valid request followed by a hostile length on the same connection: answered, closed."""
    good = struct.pack(">hhih", 18, 0, 99, -1)
    exchange(target, struct.pack(">i", len(good)) + good + b"\x7f\xff\xff\xff", framed=False)


def test_broker_survived(target: Target) -> None:
    """Runs last in this module: the broker is alive, bounded, clean and useful."""
    broker = target.broker
    assert_unharmed(target)
    assert kcat_metadata(broker.bootstrap)["brokers"][0]["id"] == broker.broker_id
    # Nothing was created outside the data dir, and every log dir is a legal topic's.
    assert [p.name for p in broker.data_dir.parent.iterdir()] == [broker.data_dir.name]
    for log_dir in (broker.data_dir / "brokers" / str(broker.broker_id) / "logs").iterdir():
        parse_partition_dir_name(log_dir.name)
