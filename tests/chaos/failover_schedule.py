"""The replicated chaos run's schedule (``test_replicated_chaos.py``): in each round, which broker
to kill (by the role it holds then), whether an expansion runs through the kill, and how long the
broker stays dead. A pure function of a seed and a round count, so ``ORDO_CHAOS_SEED`` replays a
failing run; nothing here touches the world."""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["FailoverLimits", "Round", "Target", "make_rounds"]


class Target(StrEnum):
    """A role; the broker holding it when the round starts is the one killed."""

    ORDERED_LEADER = "ordered-leader"  # leads a partition the OrderedProducers write
    UNIT_LEADER = "unit-leader"  # leads a partition the GroupProducer members' units write
    TXN_COORDINATOR = "txn-coordinator"  # coordinates a member's transactional id ordo.<ns>.<group>.<p>
    GROUP_COORDINATOR = "group-coordinator"  # coordinates the GatedConsumers' group
    EPOCH_LOG_LEADER = "epoch-log-leader"  # leads the epoch log, where the operator writes fences


@dataclass(frozen=True)
class Round:
    target: Target
    pick: int  # which partition or source partition: pick mod how many there are then
    expand_to: int = 0  # > 0: an OrderedTopicExpansion to this count starts just before the kill
    lead: float = 0.0  # seconds from creating that expansion to the kill
    down: float = 0.0  # seconds the broker stays dead once its partitions have new leaders

    def describe(self) -> str:
        during = (
            f" during an expansion to {self.expand_to} (kill {self.lead:.1f}s in)" if self.expand_to else ""
        )
        return f"kill the {self.target} (pick {self.pick}){during}, down {self.down:.1f}s"


@dataclass(frozen=True)
class FailoverLimits:
    partitions: int = 3  # the ordered topic's count at the start
    max_partitions: int = 48
    max_lead: float = 1.5  # an expansion's phases take about a second on an idle machine
    min_down: float = 0.5
    max_down: float = 4.0
    expand_share: float = 0.4  # of the rounds beyond the two that always expand


def make_rounds(seed: int, rounds: int, limits: FailoverLimits | None = None) -> list[Round]:
    """``rounds`` rounds: every target once in the first ``len(Target)`` (in a seeded order), then
    seeded picks. The epoch log leader's rounds and the first ordered leader's run an expansion
    through the kill (the fence and the thresholds go through the dead broker's partitions), and
    so does a share of the others, while the topic can still grow. A shorter run (``make test``'s
    one round) kills the first ``rounds`` roles of that order, each through an expansion: which
    roles varies with the seed, run after run."""
    lim = limits or FailoverLimits()
    if rounds < 1:
        raise ValueError(f"a failover run needs at least one round, got {rounds}")
    short = rounds < len(Target)
    rng = random.Random(seed)
    targets = list(Target)
    rng.shuffle(targets)
    targets = targets[:rounds] + [rng.choice(list(Target)) for _ in range(rounds - len(targets))]
    partitions = lim.partitions
    out: list[Round] = []
    for i, target in enumerate(targets):
        always = (
            short
            or target == Target.EPOCH_LOG_LEADER
            or (target == Target.ORDERED_LEADER and i < len(Target))
        )
        expand_to = 0
        if always or rng.random() < lim.expand_share:
            grown = min(lim.max_partitions, partitions + rng.choice([1, 2, partitions]))
            if grown > partitions:
                partitions = expand_to = grown
        lead = round(rng.uniform(0, lim.max_lead), 2) if expand_to else 0.0
        down = round(rng.uniform(lim.min_down, lim.max_down), 2)
        out.append(Round(target, rng.randrange(1000), expand_to, lead, down))
    return out
