"""Epochs of ordered topic expansion (KIP-253): the history model, the prior map and the gate.

The pure part lives here; the epoch log and producer registry clients build on it.
"""

from .gate import Gate, GateKeeper
from .history import Epoch, EpochError, EpochHistory, EpochState, prior_map

__all__ = ["Epoch", "EpochError", "EpochHistory", "EpochState", "Gate", "GateKeeper", "prior_map"]
