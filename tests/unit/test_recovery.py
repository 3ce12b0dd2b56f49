"""Crash recovery: torn tails, flipped bytes, broken indexes, and a full disk.

The fuzz tests copy the files of a log that is still open (so the active
segment has its preallocated zero tail and untrimmed indexes, as after a
crash), damage the copy, reopen it, and compare with an independent model of
the longest valid prefix of batches.
"""

from __future__ import annotations

import contextlib
import logging
import random
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slog.core.errors import StorageError
from slog.core.log import PartitionLog
from slog.core.log_config import LogConfig
from slog.core.segment import segment_file_stem
from tests.unit.batchgen import make_batch, make_sized_batch

REPO = Path(__file__).resolve().parents[2]
INT32_MAX = (1 << 31) - 1
CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=128, segment_index_bytes=4096)


@dataclass(frozen=True)
class Stored:
    """One batch as the golden log stored it."""

    segment: int  # segment base offset
    position: int
    data: bytes


@dataclass
class Golden:
    directory: Path
    batches: list[Stored]
    segment_bases: list[int]


def build_golden(directory: Path, seed: int = 7) -> Golden:
    rng = random.Random(seed)
    log = PartitionLog.open(directory / "live", CONFIG)
    for i in range(90):
        values = [rng.randbytes(rng.randint(5, 150)) for _ in range(rng.randint(1, 4))]
        log.append(make_batch(0, values), leader_epoch=i // 25)
    copy = directory / "golden"
    shutil.copytree(log.directory, copy)  # a crash image: the log is still open
    batches = []
    for segment in log.segments:
        view = segment.read(segment.base_offset, 1 << 30, None, True).view
        for position, header in segment.headers():
            data = bytes(view[position : position + header.size])
            batches.append(Stored(segment.base_offset, position, data))
    bases = [s.base_offset for s in log.segments]
    log.close()  # after the copy, which keeps the crash image
    return Golden(copy, batches, bases)


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Golden:
    return build_golden(tmp_path_factory.mktemp("golden"))


def log_file(directory: Path, base: int, suffix: str = ".log") -> Path:
    return directory / f"{segment_file_stem(base)}{suffix}"


# ------------------------------------------------------------------ the model


def expected_prefix(directory: Path, golden: Golden) -> tuple[list[bytes], int]:
    """Batches a correct recovery keeps, and the resulting log end offset.

    Batches keep their golden boundaries: a changed length breaks the CRC.
    A changed batch is still valid only if every change lies outside the CRC
    (baseOffset, partitionLeaderEpoch) and offsets still increase, also
    across segments (below the next segment's base offset).
    """
    kept: list[bytes] = []
    next_offset = golden.segment_bases[0]
    bases = golden.segment_bases
    for i, base in enumerate(bases):
        data = log_file(directory, base).read_bytes()
        end = 0
        next_offset = max(next_offset, base)
        limit = bases[i + 1] if i + 1 < len(bases) else base + INT32_MAX + 1
        for stored in (b for b in golden.batches if b.segment == base):
            current = data[stored.position : stored.position + len(stored.data)]
            if not _still_valid(current, stored.data, next_offset, limit):
                break
            kept.append(current)
            end = stored.position + len(current)
            next_offset = (
                int.from_bytes(current[:8], "big", signed=True)
                + int.from_bytes(current[23:27], "big")
                + 1
            )
        if data[end:].strip(b"\0"):
            break  # real garbage: everything after it is gone
    return kept, next_offset


def _still_valid(current: bytes, original: bytes, next_offset: int, limit: int) -> bool:
    if len(current) != len(original):
        return False
    changed = {i for i, (a, b) in enumerate(zip(current, original, strict=True)) if a != b}
    if not changed <= set(range(8)) | set(range(12, 16)):
        return False
    new_base = int.from_bytes(current[:8], "big", signed=True)
    last = new_base + int.from_bytes(current[23:27], "big")
    return new_base >= next_offset and last < limit


def expected_epochs(kept: list[bytes]) -> list[tuple[int, int]]:
    entries: list[tuple[int, int]] = []
    for data in kept:
        epoch = int.from_bytes(data[12:16], "big", signed=True)
        if epoch >= 0 and (not entries or epoch > entries[-1][0]):
            entries.append((epoch, int.from_bytes(data[:8], "big", signed=True)))
    return entries


# ------------------------------------------------------------------ checks


def check_recovered(directory: Path, golden: Golden, **open_args: object) -> PartitionLog:
    kept, leo = expected_prefix(directory, golden)
    log = PartitionLog.open(directory, CONFIG, **open_args)  # type: ignore[arg-type]
    assert log.log_end_offset == leo
    assert log.read(log.log_start_offset, 1 << 30).tobytes() == b"".join(kept)
    assert log.leader_epoch_cache.entries == expected_epochs(kept)
    for data in kept:  # every index entry gets used (and verified) on the way
        base = int.from_bytes(data[:8], "big", signed=True)
        assert log.read(base, 1).views[0].tobytes() == data
    for segment in log.segments:  # indexes point at batch starts
        starts = {p: h.last_offset for p, h in segment.headers()}
        segment.offset_index.sanity_check(max(segment.size, 1))
        for relative, position in segment.offset_index.all_entries():
            assert starts[position] == segment.base_offset + relative
    info = log.append(make_batch(0, [b"after recovery"]))
    assert info.first_offset == leo
    return log


def damage(directory: Path, golden: Golden, rng: random.Random, *, anywhere: bool) -> None:
    """Cut the last segment somewhere and flip a few bytes."""
    last = log_file(directory, golden.segment_bases[-1])
    data = bytearray(last.read_bytes())
    used = max(
        b.position + len(b.data) for b in golden.batches if b.segment == golden.segment_bases[-1]
    )
    if rng.random() < 0.7:
        data = data[: rng.randint(0, used + 64)]
    last.write_bytes(bytes(data))
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        base = rng.choice(golden.segment_bases) if anywhere else golden.segment_bases[-1]
        path = log_file(directory, base)
        content = bytearray(path.read_bytes())
        if content:
            content[rng.randrange(len(content))] ^= rng.randint(1, 255)
            path.write_bytes(bytes(content))
    if rng.random() < 0.2:  # a damaged or missing index, too
        index = log_file(
            directory, rng.choice(golden.segment_bases), rng.choice([".index", ".timeindex"])
        )
        if rng.random() < 0.5:
            index.unlink(missing_ok=True)
        elif index.exists() and index.stat().st_size:
            raw = bytearray(index.read_bytes())
            raw[rng.randrange(len(raw))] ^= 0xFF
            index.write_bytes(bytes(raw))


# ------------------------------------------------------------------ fuzz


def test_recovery_fuzz_seeded(golden: Golden, tmp_path: Path) -> None:
    iterations = 150
    for seed in range(iterations):
        rng = random.Random(seed)
        directory = tmp_path / f"t-{seed}"
        shutil.copytree(golden.directory, directory)
        anywhere = rng.random() < 0.5
        damage(directory, golden, rng, anywhere=anywhere)
        # Segments before the recovery point are trusted, so only damage after it can be found.
        recovery_point = 0 if anywhere else rng.choice([0, golden.segment_bases[-1]])
        try:
            log = check_recovered(directory, golden, recovery_point=recovery_point)
        except AssertionError as exc:
            raise AssertionError(f"seed {seed}: {exc}") from exc
        log.close()
        reopened = PartitionLog.open(directory, CONFIG, clean_shutdown=True)
        assert reopened.read(0, 1 << 30).size == reopened.size_in_bytes
        reopened.close()
        shutil.rmtree(directory)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    cut=st.one_of(st.none(), st.floats(min_value=0.0, max_value=1.0)),
    flips=st.lists(
        st.tuples(st.floats(min_value=0.0, max_value=0.9999), st.integers(1, 255)), max_size=4
    ),
)
def test_recovery_fuzz_hypothesis(
    golden: Golden,
    tmp_path_factory: pytest.TempPathFactory,
    cut: float | None,
    flips: list[tuple[float, int]],
) -> None:
    directory = tmp_path_factory.mktemp("hyp") / "t-0"
    shutil.copytree(golden.directory, directory)
    path = log_file(directory, golden.segment_bases[-1])
    data = bytearray(path.read_bytes())
    if cut is not None:
        data = data[: int(len(data) * cut)]
    for where, mask in flips:
        if data:
            data[int(where * len(data))] ^= mask
    path.write_bytes(bytes(data))
    check_recovered(directory, golden).close()
    shutil.rmtree(directory)


# ------------------------------------------------------------------ specific cases


@pytest.fixture
def crashed(golden: Golden, tmp_path: Path) -> Path:
    directory = tmp_path / "t-0"
    shutil.copytree(golden.directory, directory)
    return directory


def test_zero_tail_is_a_clean_end(crashed: Path, golden: Golden, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="slog.core.log"):
        log = check_recovered(crashed, golden)
    assert not caplog.records
    appended = len(make_batch(0, [b"after recovery"]))  # by check_recovered
    assert log.read(0, 1 << 30).size == sum(len(b.data) for b in golden.batches) + appended


def test_torn_tail_is_truncated_with_a_warning(crashed: Path, golden: Golden, caplog) -> None:
    last = golden.batches[-1]
    path = log_file(crashed, last.segment)
    path.write_bytes(path.read_bytes()[: last.position + 30])
    with caplog.at_level(logging.WARNING, logger="slog.core.log"):
        log = check_recovered(crashed, golden)
    previous = golden.batches[-2]
    expected_leo = (
        int.from_bytes(previous.data[:8], "big") + int.from_bytes(previous.data[23:27], "big") + 1
    )
    assert log.log_end_offset == expected_leo + 1  # +1: check_recovered appended one
    message = "\n".join(r.getMessage() for r in caplog.records)
    assert f"truncated 30 bytes of invalid data at offset {expected_leo}" in message


def test_corruption_in_a_middle_segment_drops_later_segments(
    crashed: Path, golden: Golden, caplog
) -> None:
    middle = golden.segment_bases[len(golden.segment_bases) // 2]
    victim = next(b for b in golden.batches if b.segment == middle and b.position > 0)
    path = log_file(crashed, middle)
    raw = bytearray(path.read_bytes())
    raw[victim.position + 40] ^= 0x55
    path.write_bytes(bytes(raw))
    with caplog.at_level(logging.WARNING, logger="slog.core.log"):
        log = check_recovered(crashed, golden)
    assert log.segments[-1].base_offset == middle
    assert not log_file(crashed, golden.segment_bases[-1]).exists()
    assert "deleting segment" in caplog.text


def test_clean_marker_with_untrimmed_segment_still_recovers(crashed: Path, golden: Golden) -> None:
    check_recovered(crashed, golden, clean_shutdown=True)


def test_indexes_rebuilt_after_clean_shutdown(golden: Golden, tmp_path: Path, caplog) -> None:
    directory = tmp_path / "t-0"
    shutil.copytree(golden.directory, directory)
    PartitionLog.open(directory, CONFIG).close()
    log_file(directory, golden.segment_bases[0], ".index").unlink()
    log_file(directory, golden.segment_bases[1], ".timeindex").write_bytes(b"\x01" * 25)
    path = log_file(directory, golden.segment_bases[2], ".index")
    path.write_bytes(path.read_bytes()[::-1])
    with caplog.at_level(logging.WARNING):
        check_recovered(directory, golden, clean_shutdown=True)
    assert "rebuilding" in caplog.text


def test_wrong_but_ordered_index_entries_are_caught_on_use(
    golden: Golden, tmp_path: Path, caplog
) -> None:
    directory = tmp_path / "t-0"
    shutil.copytree(golden.directory, directory)
    PartitionLog.open(directory, CONFIG).close()
    base = golden.segment_bases[1]
    index = log_file(directory, base, ".index")
    raw = bytearray(index.read_bytes())
    position = int.from_bytes(raw[12:16], "big")
    raw[12:16] = (position + 1).to_bytes(4, "big")  # 2nd entry off by one byte, still in order
    index.write_bytes(bytes(raw))
    times = log_file(directory, base, ".timeindex")
    raw = bytearray(times.read_bytes())
    damaged_ts = int.from_bytes(raw[0:8], "big") - 1  # 1st entry 1 ms early, still in order
    raw[0:8] = damaged_ts.to_bytes(8, "big")
    times.write_bytes(bytes(raw))

    log = PartitionLog.open(directory, CONFIG, clean_shutdown=True)  # passes the sanity check
    with caplog.at_level(logging.WARNING):
        for stored in golden.batches:
            offset = int.from_bytes(stored.data[:8], "big")
            assert log.read(offset, 1).views[0].tobytes() == stored.data
    assert "offset index entry" in caplog.text
    segment = next(s for s in log.segments if s.base_offset == base)
    assert segment.time_index.lookup(damaged_ts)[0] == -1  # the rebuild fixed both indexes
    segment.time_index.reset()  # so break the time index again, in memory this time
    segment.time_index.maybe_append(damaged_ts, base)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        found = segment.find_offset_by_timestamp(damaged_ts, 0)
    assert "time index entry" in caplog.text
    assert found is not None and found[1] >= damaged_ts


def test_leftovers_are_cleaned(crashed: Path, golden: Golden) -> None:
    (crashed / "leader-epoch-checkpoint.tmp").write_text("half written")
    orphan = log_file(crashed, 10**9, ".index")
    orphan.write_bytes(bytes(16))
    check_recovered(crashed, golden).close()
    assert not (crashed / "leader-epoch-checkpoint.tmp").exists()
    assert not orphan.exists()


def test_garbage_everywhere_still_opens(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    directory.mkdir()
    log_file(directory, 0).write_bytes(random.Random(1).randbytes(5000))
    log_file(directory, 0, ".index").write_bytes(random.Random(2).randbytes(77))
    log = PartitionLog.open(directory, CONFIG)
    assert log.log_end_offset == 0
    assert log.append(make_batch(0)).first_offset == 0


def test_recovery_rejects_offsets_going_backwards(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    directory.mkdir()
    data = make_batch(0, [b"a"] * 3) + make_batch(2, [b"b"]) + make_batch(10, [b"c"])
    log_file(directory, 0).write_bytes(data)
    log = PartitionLog.open(directory, CONFIG)
    assert log.log_end_offset == 3
    assert log.read(0, 1 << 20).tobytes() == make_batch(0, [b"a"] * 3)


# ------------------------------------------------------------------ full disk


@contextlib.contextmanager
def tiny_tmpfs(mount_point: Path, size: str = "2m") -> Iterator[bool]:
    mount_point.mkdir()
    try:
        result = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(mount_point)],
            capture_output=True,
        )
    except OSError:
        yield False
        return
    if result.returncode != 0:
        yield False
        return
    try:
        yield True
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def append_until_full(log: PartitionLog, batch_size: int) -> list[bytes]:
    acknowledged = []
    for i in range(10_000):
        batch = make_sized_batch(0, batch_size, timestamp=1000 + i)
        try:
            log.append(batch)
        except StorageError:
            return acknowledged
        acknowledged.append(batch)
    raise AssertionError("the disk never filled up")


@pytest.mark.parametrize("preallocate", [True, False])
def test_full_disk_on_tmpfs(tmp_path: Path, preallocate: bool) -> None:
    with tiny_tmpfs(tmp_path / "mnt") as mounted:
        if not mounted:
            pytest.skip("cannot mount a tmpfs here; see test_full_disk_with_rlimit")
        directory = tmp_path / "mnt" / "t-0"
        config = LogConfig(
            segment_bytes=256 * 1024, segment_index_bytes=4096, preallocate=preallocate
        )
        log = PartitionLog.open(directory, config)
        acknowledged = append_until_full(log, 16 * 1024)
        assert len(acknowledged) > 20
        leo = log.log_end_offset
        assert leo == len(acknowledged)
        with pytest.raises(StorageError):
            log.append(make_sized_batch(0, 16 * 1024))
        assert log.log_end_offset == leo
        stored = log.read(0, 1 << 30).tobytes()
        # Offsets were assigned from 0, as the acknowledged copies' offsets were.
        assert stored == b"".join(
            bytes(int(i).to_bytes(8, "big")) + b[8:] for i, b in enumerate(acknowledged)
        )
        # A crash now: a second instance recovers without the first having closed.
        recovered = PartitionLog.open(directory, config)
        assert recovered.log_end_offset == leo
        assert recovered.read(0, 1 << 30).tobytes() == stored
        recovered.close()
        reopened = PartitionLog.open(directory, config, clean_shutdown=True)
        assert reopened.read(0, 1 << 30).tobytes() == stored
        reopened.close()


RLIMIT_SCRIPT = """
import hashlib, resource, signal, sys
from pathlib import Path
from slog.core.errors import StorageError
from slog.core.log import PartitionLog
from slog.core.log_config import LogConfig
from tests.unit.batchgen import make_sized_batch

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG instead of being killed
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
config = LogConfig(segment_bytes=4 << 20, preallocate=False)
log = PartitionLog.open(Path(sys.argv[1]), config)
errors = 0
for i in range(1000):
    try:
        log.append(make_sized_batch(0, 16 * 1024))
    except StorageError as exc:
        errors += 1
        if errors == 3:
            break
data = log.read(0, 1 << 30).tobytes()
print(log.log_end_offset, hashlib.sha256(data).hexdigest(), flush=True)
"""


def test_full_disk_with_rlimit(tmp_path: Path) -> None:
    """Portable stand-in for a full disk: RLIMIT_FSIZE makes allocation fail with EFBIG."""
    import hashlib

    directory = tmp_path / "t-0"
    result = subprocess.run(
        [sys.executable, "-c", RLIMIT_SCRIPT, str(directory)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    leo, digest = result.stdout.split()
    assert int(leo) == (1 << 20) // (16 * 1024)  # exactly what fit under the limit
    log = PartitionLog.open(directory, LogConfig(segment_bytes=4 << 20, preallocate=False))
    assert log.log_end_offset == int(leo)
    assert hashlib.sha256(log.read(0, 1 << 30).tobytes()).hexdigest() == digest
