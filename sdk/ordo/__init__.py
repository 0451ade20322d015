"""ordo: Kafka producer groups (KIP-509) and ordered topic expansion (KIP-253) on Kubernetes.

The SDK used inside producer and consumer pods. Pure planning code lives in
``ordo.assignment``, ``ordo.epochs`` and ``ordo.partitioners``; the API models in ``ordo.api``.
"""

__version__ = "0.1.0"
