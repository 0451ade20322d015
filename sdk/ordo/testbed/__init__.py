"""ordo's testbed: stand-ins for Kafka and Kubernetes on one machine (test support, shipped for
``ordo sandbox`` and ``ordo testbed up``; not product code).

- ``ordo.testbed.kafka``: the Tansu broker behind ordo's Kafka-protocol proxy.
- ``ordo.testbed.kube``: a Kubernetes API emulator.
- ``ordo.testbed.pods``: local processes as pods.
- ``ordo.testbed.operator``: the ordo operator as a local process.
"""
