"""Epochs of ordered topic expansion (KIP-253): the history model, the prior map and the gate.

The pure part lives here; the epoch log's client (``log``) and the producer registry's
(``liveness``: who is live, who acknowledged a fence) build on it.
"""

from .gate import Gate, GateKeeper
from .history import Epoch, EpochError, EpochHistory, EpochState, prior_map
from .stamp import EPOCH_HEADER, stamp, stamped_epoch

__all__ = [
    "EPOCH_HEADER",
    "Epoch",
    "EpochError",
    "EpochHistory",
    "EpochState",
    "Gate",
    "GateKeeper",
    "prior_map",
    "stamp",
    "stamped_epoch",
]
