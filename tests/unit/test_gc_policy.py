"""The collector policy: settled state is never scanned again, discarded state is reclaimed.

Each check runs in a fresh interpreter: the policy changes its process's
collector (freezes objects), which must not leak into the test runner.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

# Long-lived state is objects in reference cycles, as partitions and their logs are.
PROLOGUE = """
import gc, json
from slog.core import gc_policy

class Replica:
    def __init__(self):
        self.me = self
        self.parts = [self, {"log": [self]}]

def tracked_young():
    return sum(len(gc.get_objects(g)) for g in range(3))
"""


def run(body: str) -> dict[str, int]:
    code = PROLOGUE + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    result: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_settled_state_is_frozen_and_full_collections_skip_it() -> None:
    result = run("""
        gc_policy.install()
        replicas = [Replica() for _ in range(20_000)]
        before = tracked_young()
        gc_policy.settle()
        print(json.dumps({"before": before, "frozen": gc.get_freeze_count(),
                          "scanned_after": tracked_young(), "kept": len(replicas)}))
    """)
    assert result["before"] >= 4 * 20_000
    assert result["frozen"] >= 4 * 20_000
    # a full collection now walks only what is not frozen: a few hundred objects, not 80,000
    assert result["scanned_after"] < 2_000


def test_built_settles_once_enough_state_was_built() -> None:
    result = run("""
        replicas = []
        for n in range(gc_policy.SETTLE_EVERY - 1):
            replicas.append(Replica())
            gc_policy.built()
        early = gc.get_freeze_count()
        replicas.append(Replica())
        gc_policy.built()
        print(json.dumps({"early": early, "after": gc.get_freeze_count()}))
    """)
    assert result["early"] == 0
    assert result["after"] > 0


def test_discarded_frozen_cycles_are_reclaimed_and_survivors_frozen_again() -> None:
    result = run("""
        import weakref
        gc_policy.install()
        kept = [Replica() for _ in range(1_000)]
        doomed = [Replica() for _ in range(10_000)]
        probe = weakref.ref(doomed[0])
        gc_policy.settle()
        del doomed  # cycles: reference counting alone frees none of them
        alive_while_frozen = probe() is not None
        gc.collect()
        alive_after_plain_collection = probe() is not None
        gc_policy.discard()
        thawed = gc.get_freeze_count()
        gc.collect()
        print(json.dumps({
            "alive_while_frozen": alive_while_frozen,
            "alive_after_plain_collection": alive_after_plain_collection,
            "thawed": thawed, "alive_after_thaw": probe() is not None,
            "refrozen": gc.get_freeze_count(), "kept": len(kept)}))
    """)
    assert result["alive_while_frozen"] and result["alive_after_plain_collection"]
    assert result["thawed"] == 0
    assert not result["alive_after_thaw"]
    # the thorough pass froze its survivors (the kept replicas) again
    assert 4 * 1_000 <= result["refrozen"] < 4 * 10_000
